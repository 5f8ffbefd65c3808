package outrigger

import (
	"context"
	"fmt"
	"log"
	"sort"
	"sync"
	"time"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// DefaultRetain is how many superseded generations a Mirror keeps: a scheduling cycle runs against one
// generation while binding cycles keep changing the cache, so requests for a slightly old generation
// are normal.
const DefaultRetain = 16

// NodeState is one node of a Snapshot: the node object and the pods placed on it. A NodeState is never
// changed once a Snapshot holds it (a change makes a new one), so converted forms of it can be cached
// on it with Memo.
type NodeState struct {
	// ID is the node's id in the framework's cache.
	ID uint32
	// Node is the node object.
	Node *pb.Node
	// Pods are the pods placed on the node (assumed or bound), in placement order. Placements from
	// the mirror carry the whole pod (PodPlacement.Pod).
	Pods []*pb.PodPlacement
	// RequestedDelta is added to what the node's pods request, by a cycle's node view (a transformer's
	// NodeChange.requested); nil outside views.
	RequestedDelta map[string]int64
	memo           sync.Map
}

// Name is the node's name.
func (n *NodeState) Name() string { return n.Node.GetMetadata().GetName() }

// Memo is the value cached under key on this node state, built by build on first use (concurrent
// first uses may build twice; one result is kept).
func (n *NodeState) Memo(key any, build func() any) any {
	if v, ok := n.memo.Load(key); ok {
		return v
	}
	v, _ := n.memo.LoadOrStore(key, build())
	return v
}

func (n *NodeState) withPods(pods []*pb.PodPlacement) *NodeState {
	return &NodeState{ID: n.ID, Node: n.Node, Pods: pods, RequestedDelta: n.RequestedDelta}
}

// Snapshot is the cluster as of one framework generation. It is immutable; Memo caches values derived
// from it (e.g. a lister's node list).
type Snapshot struct {
	// Generation is the framework's snapshot generation.
	Generation uint64
	// NodeGeneration is the generation of the last node change at or before Generation.
	NodeGeneration uint64
	byID           []*NodeState // index: node id
	byName         map[string]uint32
	ids            []uint32 // ascending
	memo           sync.Map
	nodes          *nodeTable // shared by consecutive snapshots whose node objects are the same
	volumes        *Volumes   // the mirror's (live, shared by its snapshots)
	devices        *Devices   // likewise
}

// nodeTable holds what plugins derive from the node objects alone, shared by every snapshot until a
// node is added, changed or removed (pod placements do not change it).
type nodeTable struct{ memo sync.Map }

// EmptySnapshot is a snapshot with no nodes.
func EmptySnapshot() *Snapshot {
	return &Snapshot{byName: map[string]uint32{}, nodes: &nodeTable{}, volumes: newVolumes(), devices: newDevices()}
}

// Devices are the device objects (ResourceSlices, DeviceClasses, ResourceClaims) the mirror holds: live,
// shared by every snapshot of the mirror, and empty unless a plugin of the host registered NeedsDevices.
func (s *Snapshot) Devices() *Devices { return s.devices }

// Volumes are the storage objects (claims, volumes, classes, CSINodes) the mirror holds: live, shared
// by every snapshot of the mirror, and empty unless a plugin of the host registered NeedsVolumes.
func (s *Snapshot) Volumes() *Volumes { return s.volumes }

// Node is the node with id, or nil.
func (s *Snapshot) Node(id uint32) *NodeState {
	if int(id) < len(s.byID) {
		return s.byID[id]
	}
	return nil
}

// NodeByName is the node named name, or nil.
func (s *Snapshot) NodeByName(name string) *NodeState {
	id, ok := s.byName[name]
	if !ok {
		return nil
	}
	return s.Node(id)
}

// Len is the number of nodes.
func (s *Snapshot) Len() int { return len(s.ids) }

// Nodes are every node, by ascending id.
func (s *Snapshot) Nodes() []*NodeState {
	out := make([]*NodeState, 0, len(s.ids))
	for _, id := range s.ids {
		out = append(out, s.byID[id])
	}
	return out
}

// Memo is the value cached under key on this snapshot, built by build on first use.
func (s *Snapshot) Memo(key any, build func() any) any {
	if v, ok := s.memo.Load(key); ok {
		return v
	}
	v, _ := s.memo.LoadOrStore(key, build())
	return v
}

// NodesMemo is the value cached under key for this snapshot's node objects, built by build on first
// use: it is shared with every other snapshot whose nodes are the same (only pods differ), so a plugin
// that reads node objects only (a label, allocatable) derives its per-node arrays once per node change,
// not once per generation. Index such arrays by NodeState.ID.
func (s *Snapshot) NodesMemo(key any, build func() any) any {
	if v, ok := s.nodes.memo.Load(key); ok {
		return v
	}
	v, _ := s.nodes.memo.LoadOrStore(key, build())
	return v
}

// MaxID is one more than the largest node id of the snapshot (the length of an array indexed by id).
func (s *Snapshot) MaxID() int { return len(s.byID) }

// derive starts a copy of s whose nodes can be replaced (copy on write: NodeStates are shared).
func (s *Snapshot) derive() *Snapshot {
	return &Snapshot{
		Generation: s.Generation, NodeGeneration: s.NodeGeneration,
		byID: append([]*NodeState(nil), s.byID...), byName: s.byName, ids: s.ids, nodes: s.nodes,
		volumes: s.volumes, devices: s.devices,
	}
}

func (s *Snapshot) setNode(n *NodeState, nodeSetChanged *bool) {
	for int(n.ID) >= len(s.byID) {
		s.byID = append(s.byID, nil)
	}
	old := s.byID[n.ID]
	if old == nil || old.Name() != n.Name() {
		*nodeSetChanged = true
	}
	s.byID[n.ID] = n
}

// reindex rebuilds the name index and id order after the node set changed.
func (s *Snapshot) reindex() {
	s.byName = make(map[string]uint32, len(s.byID))
	s.ids = s.ids[:0:0]
	for id, n := range s.byID {
		if n != nil {
			s.byName[n.Name()] = uint32(id)
			s.ids = append(s.ids, uint32(id))
		}
	}
	sort.Slice(s.ids, func(i, j int) bool { return s.ids[i] < s.ids[j] })
}

// WithView is s as a cycle's node view sees it (CycleContext.node_view), applied in the contract's
// order: pods removed, nodes added, pods placed, then node changes in order. Only the nodes the view
// touches are copied; a nil view is s itself.
func (s *Snapshot) WithView(view *pb.NodeView) *Snapshot {
	if view == nil {
		return s
	}
	out := s.derive()
	changed := false
	for _, removed := range view.GetRemovedPods() {
		n := out.NodeByName(removed.GetNodeName())
		if n == nil {
			continue
		}
		pods := make([]*pb.PodPlacement, 0, len(n.Pods))
		for _, p := range n.Pods {
			if p.GetRef().GetUid() != removed.GetUid() {
				pods = append(pods, p)
			}
		}
		out.setNode(n.withPods(pods), &changed)
	}
	for _, added := range view.GetAddedNodes() {
		out.setNode(&NodeState{ID: added.GetId(), Node: added.GetNode()}, &changed)
	}
	if len(view.GetAddedNodes()) > 0 || len(view.GetChanges()) > 0 {
		out.nodes = &nodeTable{} // node objects differ from the snapshot's
	}
	if changed {
		out.reindex()
	}
	for _, pod := range view.GetAddedPods() {
		n := out.NodeByName(pod.GetSpec().GetNodeName())
		if n == nil {
			continue
		}
		placement := PlacementOf(pod, n.ID, n.Name())
		out.setNode(n.withPods(append(append([]*pb.PodPlacement(nil), n.Pods...), placement)), &changed)
	}
	for _, change := range view.GetChanges() {
		n := out.NodeByName(change.GetNodeName())
		if n == nil {
			continue
		}
		node := cloneNode(n.Node)
		if node.Status == nil {
			node.Status = &pb.NodeStatus{}
		}
		if node.Status.Allocatable == nil {
			node.Status.Allocatable = map[string]int64{}
		}
		for k, v := range change.GetAllocatable() {
			node.Status.Allocatable[k] += v
		}
		if node.Metadata == nil {
			node.Metadata = &pb.ObjectMeta{}
		}
		if len(change.GetLabels()) > 0 || len(change.GetRemoveLabels()) > 0 {
			labels := make(map[string]string, len(node.Metadata.Labels)+len(change.GetLabels()))
			for k, v := range node.Metadata.Labels {
				labels[k] = v
			}
			for k, v := range change.GetLabels() {
				labels[k] = v
			}
			for _, k := range change.GetRemoveLabels() {
				delete(labels, k)
			}
			node.Metadata.Labels = labels
		}
		var delta map[string]int64
		if len(n.RequestedDelta) > 0 || len(change.GetRequested()) > 0 {
			delta = make(map[string]int64, len(n.RequestedDelta)+len(change.GetRequested()))
			for k, v := range n.RequestedDelta {
				delta[k] = v
			}
			for k, v := range change.GetRequested() {
				delta[k] += v
			}
		}
		out.setNode(&NodeState{ID: n.ID, Node: node, Pods: n.Pods, RequestedDelta: delta}, &changed)
	}
	return out
}

// cloneNode copies the parts of a node a view changes (metadata and status); the rest is shared.
func cloneNode(n *pb.Node) *pb.Node {
	out := &pb.Node{Spec: n.GetSpec()}
	if m := n.GetMetadata(); m != nil {
		out.Metadata = &pb.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Uid: m.Uid, Labels: m.Labels,
			Annotations: m.Annotations, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
	}
	if st := n.GetStatus(); st != nil {
		alloc := make(map[string]int64, len(st.Allocatable))
		for k, v := range st.Allocatable {
			alloc[k] = v
		}
		out.Status = &pb.NodeStatus{Capacity: st.Capacity, Allocatable: alloc, Images: st.Images}
	}
	return out
}

// PlacementOf is the PodPlacement of pod on a node (what the mirror holds for a placed pod).
func PlacementOf(pod *pb.Pod, nodeID uint32, nodeName string) *pb.PodPlacement {
	meta := pod.GetMetadata()
	var ports []*pb.ContainerPort
	for _, c := range pod.GetSpec().GetContainers() {
		for _, p := range c.GetPorts() {
			if p.GetHostPort() > 0 {
				ports = append(ports, p)
			}
		}
	}
	return &pb.PodPlacement{
		Ref:    &pb.PodRef{Uid: meta.GetUid(), Namespace: meta.GetNamespace(), Name: meta.GetName()},
		NodeId: nodeID, NodeName: nodeName, Priority: pod.GetSpec().GetPriority(), Labels: meta.GetLabels(),
		Requests: pod.GetRequests(), HostPorts: ports, Pod: pod,
	}
}

// MirrorError says the mirror cannot provide the snapshot a request names.
type MirrorError struct{ msg string }

func (e *MirrorError) Error() string { return e.msg }

// Mirror is a plugin host's copy of the framework's cluster, fed by SnapshotDelta messages
// (Handle.FollowSnapshot), with the Snapshot of each recent generation. Safe for concurrent use.
type Mirror struct {
	retain   int
	mu       sync.Mutex
	cur      *Snapshot
	kept     map[uint64]*Snapshot
	order    []uint64
	podNode  map[string]uint32 // pod uid -> node id, for the latest generation
	advanced chan struct{}     // closed (and replaced) whenever a delta is applied
	storage  func(*pb.SnapshotDelta)
	// Resyncs and Deltas count full resyncs and applied deltas.
	Resyncs, Deltas int
}

// NewMirror is an empty mirror keeping retain superseded generations (DefaultRetain when <= 0).
func NewMirror(retain int) *Mirror {
	if retain <= 0 {
		retain = DefaultRetain
	}
	m := &Mirror{retain: retain}
	m.reset()
	m.advanced = make(chan struct{})
	return m
}

func (m *Mirror) reset() {
	m.cur = EmptySnapshot()
	m.kept = map[uint64]*Snapshot{}
	m.order = nil
	m.podNode = map[string]uint32{}
}

// Reset forgets everything (a new framework, or a resync to come).
func (m *Mirror) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reset()
}

// FeedStorage hands fn the storage changes of every delta applied from now on (deltas with storage
// changes, and full resyncs), inside Apply, so fn's copy is up to date whenever a generation is. fn
// first gets, under the same lock, a full resync holding every storage object the mirror has, so
// nothing applied before is missed. It replaces an earlier fn.
func (m *Mirror) FeedStorage(fn func(*pb.SnapshotDelta)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fn(m.cur.volumes.resync(m.cur.Generation))
	m.storage = fn
}

// Generation is the framework generation applied last (0: nothing yet).
func (m *Mirror) Generation() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur.Generation
}

// Latest is the snapshot of the last applied generation.
func (m *Mirror) Latest() *Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// At is the snapshot of generation if the mirror holds it (0: the latest), else nil.
func (m *Mirror) At(generation uint64) *Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	if generation == 0 {
		return m.cur
	}
	return m.kept[generation]
}

// Apply applies one delta in the contract's order: resync, node upserts, node removals, pod
// removals, pod additions, storage removals, storage upserts (into the live Volumes), device removals,
// device upserts (into the live Devices).
func (m *Mirror) Apply(d *pb.SnapshotDelta) {
	m.mu.Lock()
	defer m.mu.Unlock()
	base := m.cur
	if d.GetFullResync() {
		m.reset()
		m.Resyncs++
		base = EmptySnapshot()
	} else if d.GetGeneration() <= base.Generation {
		return // already applied (a replay after a reconnect)
	}
	next := base.derive()
	fresh := map[uint32]bool{} // NodeStates made by this delta, changed in place
	nodeSet := false
	own := func(id uint32) *NodeState {
		n := next.Node(id)
		if n == nil || fresh[id] {
			return n
		}
		c := n.withPods(append([]*pb.PodPlacement(nil), n.Pods...))
		next.byID[id] = c
		fresh[id] = true
		return c
	}
	for _, up := range d.GetNodes() {
		old := next.Node(up.GetId())
		n := &NodeState{ID: up.GetId(), Node: up.GetNode()}
		if old != nil && old.Name() == n.Name() {
			n.Pods = append([]*pb.PodPlacement(nil), old.Pods...)
		} else if old != nil {
			m.dropPods(old) // an id now names another node: the old one is gone with its pods
		}
		next.setNode(n, &nodeSet)
		fresh[n.ID] = true
	}
	for _, id := range d.GetRemovedNodeIds() {
		if old := next.Node(id); old != nil {
			m.dropPods(old)
			next.byID[id] = nil
			nodeSet = true
		}
	}
	if nodeSet {
		next.reindex()
	}
	if len(d.GetNodes()) > 0 || len(d.GetRemovedNodeIds()) > 0 {
		next.nodes = &nodeTable{}
	}
	unplace := func(uid string) {
		id, ok := m.podNode[uid]
		if !ok {
			return
		}
		delete(m.podNode, uid)
		n := own(id)
		if n == nil {
			return
		}
		for i, p := range n.Pods {
			if p.GetRef().GetUid() == uid {
				n.Pods = append(n.Pods[:i:i], n.Pods[i+1:]...)
				break
			}
		}
	}
	for _, ref := range d.GetPodsRemoved() {
		unplace(ref.GetUid())
	}
	for _, p := range d.GetPodsAdded() {
		uid := p.GetRef().GetUid()
		unplace(uid) // "a pod that moved is sent as removed and added": be lenient
		id := p.GetNodeId()
		if n := next.Node(id); n == nil || n.Name() != p.GetNodeName() {
			var ok bool
			if id, ok = next.byName[p.GetNodeName()]; !ok {
				log.Printf("snapshot delta %d places pod %s/%s on unknown node %q", d.GetGeneration(),
					p.GetRef().GetNamespace(), p.GetRef().GetName(), p.GetNodeName())
				continue
			}
		}
		n := own(id)
		n.Pods = append(n.Pods, p)
		m.podNode[uid] = id
	}
	next.volumes.apply(d)
	next.devices.apply(d)
	if m.storage != nil && (d.GetFullResync() || len(d.GetStorageUpserts()) > 0 || len(d.GetStorageRemoved()) > 0) {
		m.storage(d)
	}
	next.Generation = d.GetGeneration()
	if d.GetFullResync() || len(d.GetNodes()) > 0 || len(d.GetRemovedNodeIds()) > 0 {
		next.NodeGeneration = d.GetNodeGeneration()
		if next.NodeGeneration == 0 {
			next.NodeGeneration = next.Generation
		}
	}
	m.cur = next
	m.kept[next.Generation] = next
	m.order = append(m.order, next.Generation)
	for len(m.order) > m.retain+1 {
		delete(m.kept, m.order[0])
		m.order = m.order[1:]
	}
	m.Deltas++
	close(m.advanced)
	m.advanced = make(chan struct{})
}

func (m *Mirror) dropPods(n *NodeState) {
	for _, p := range n.Pods {
		delete(m.podNode, p.GetRef().GetUid())
	}
}

// reach waits until the mirror has applied generation (bounded by timeout and ctx).
func (m *Mirror) reach(ctx context.Context, generation uint64, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		m.mu.Lock()
		at, ch := m.cur.Generation, m.advanced
		m.mu.Unlock()
		if at >= generation {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return &MirrorError{fmt.Sprintf("snapshot generation %d not reached within %s (the mirror is at generation %d)",
				generation, timeout, at)}
		case <-ctx.Done():
			return &MirrorError{fmt.Sprintf("snapshot generation %d not reached before the call ended (the mirror is at generation %d)",
				generation, at)}
		}
	}
}

// WaitFor is the snapshot of generation, waiting up to timeout for the mirror to reach it.
func (m *Mirror) WaitFor(ctx context.Context, generation uint64, timeout time.Duration) (*Snapshot, error) {
	if err := m.reach(ctx, generation, timeout); err != nil {
		return nil, err
	}
	if s := m.At(generation); s != nil {
		return s, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return nil, &MirrorError{fmt.Sprintf("snapshot generation %d is no longer held by the mirror (it is at generation %d and keeps the last %d)",
		generation, m.cur.Generation, m.retain)}
}

// WaitUntil is the latest snapshot once the mirror has applied generation (or a later one), waiting
// up to timeout.
func (m *Mirror) WaitUntil(ctx context.Context, generation uint64, timeout time.Duration) (*Snapshot, error) {
	if err := m.reach(ctx, generation, timeout); err != nil {
		return nil, err
	}
	return m.Latest(), nil
}

// WithNodesOf is a snapshot whose node set is the one of nodeGeneration: the snapshot of generation
// if held, else the latest once the mirror reached nodeGeneration with no node change since.
func (m *Mirror) WithNodesOf(ctx context.Context, nodeGeneration, generation uint64, timeout time.Duration) (*Snapshot, error) {
	if err := m.reach(ctx, nodeGeneration, timeout); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.kept[generation]; s != nil {
		return s, nil
	}
	if m.cur.NodeGeneration <= nodeGeneration {
		return m.cur, nil
	}
	return nil, &MirrorError{fmt.Sprintf("the nodes changed since snapshot generation %d (the mirror is at generation %d, its last node change at %d)",
		generation, m.cur.Generation, m.cur.NodeGeneration)}
}
