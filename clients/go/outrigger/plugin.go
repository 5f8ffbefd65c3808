package outrigger

import (
	"context"
	"encoding/json"
	"time"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// Plugin is what every hosted plugin implements: its name as profiles reference it.
type Plugin interface {
	Name() string
}

// Node is one node of a batch: its id, its name, and its state in the cycle's snapshot (nil when the
// plugin's host does not follow the mirror, see Registration.NeedsSnapshot).
type Node struct {
	ID    uint32
	Name  string
	State *NodeState
}

// PreEnqueuePlugin may keep a pod out of the active queue.
type PreEnqueuePlugin interface {
	Plugin
	PreEnqueue(c *Call, pod *pb.Pod) *Status
}

// QueueSortPlugin maps a pod to a sort key once per (re)queueing; keys compare part by part
// (int64 < float64 < string across kinds), smaller first.
type QueueSortPlugin interface {
	Plugin
	SortKey(c *Call, pod *pb.Pod, enqueued time.Time, attempts uint32) []any
}

// EnqueueExtensions names the cluster events that may make pods the plugin rejected schedulable
// again; QueueingHint is asked for the events registered with a hint.
type EnqueueExtensions interface {
	Plugin
	EventsToRegister() []*pb.ClusterEventWithHint
	QueueingHint(c *Call, pod *pb.Pod, event *pb.ClusterEvent, oldObject, newObject json.RawMessage) bool
}

// PreFilterResult narrows the candidate nodes of a cycle (nil: no narrowing).
type PreFilterResult struct {
	NodeNames []string
}

// PreFilterPlugin checks the pod and precomputes state for Filter.
type PreFilterPlugin interface {
	Plugin
	PreFilter(c *Call, pod *pb.Pod) (*PreFilterResult, *Status)
}

// PreFilterExtensions accounts for a pod added to or removed from a node during preemption.
type PreFilterExtensions interface {
	AddPod(c *Call, pod, other *pb.Pod, node Node) *Status
	RemovePod(c *Call, pod, other *pb.Pod, node Node) *Status
}

// FilterPlugin judges a batch of nodes: one status per node, in batch order (nil: the node fits).
type FilterPlugin interface {
	Plugin
	Filter(c *Call, pod *pb.Pod, nodes []Node) []*Status
}

// PostFilterPlugin runs when no node passed Filter. statuses holds each node's rejection by name
// ("" for the nodes not listed). A node in nominatedNode nominates the pod there; "" leaves the pod's
// nomination as it is (a plugin that must clear it implements PostFilterResultPlugin instead).
type PostFilterPlugin interface {
	Plugin
	PostFilter(c *Call, pod *pb.Pod, statuses map[string]*Status) (nominatedNode string, status *Status)
}

// PostFilterResult is what a PostFilter found (kube-scheduler's PostFilterResult): NominatedNodeName
// is the pod's nomination from now on, "" clearing it.
type PostFilterResult struct {
	NominatedNodeName string
}

// PostFilterResultPlugin is a PostFilter plugin that tells no result (nil: the pod's nomination stays
// as it is) from a result naming no node (which clears it, as kube-scheduler's DefaultPreemption does
// when no node can be made room on). The host calls PostFilterResult, not PostFilter, on a plugin
// that has it.
type PostFilterResultPlugin interface {
	Plugin
	PostFilterResult(c *Call, pod *pb.Pod, statuses map[string]*Status) (*PostFilterResult, *Status)
}

// PreScorePlugin precomputes state for Score over the feasible nodes.
type PreScorePlugin interface {
	Plugin
	PreScore(c *Call, pod *pb.Pod, nodes []Node) *Status
}

// ScorePlugin scores a batch of feasible nodes: one score per node, in batch order, in [0, 100]
// unless the plugin also implements NormalizeScorePlugin. An error fails the batch.
type ScorePlugin interface {
	Plugin
	Score(c *Call, pod *pb.Pod, nodes []Node) ([]int64, error)
}

// NormalizeScorePlugin maps every raw score of the cycle into [0, 100], in place.
type NormalizeScorePlugin interface {
	ScorePlugin
	NormalizeScore(c *Call, pod *pb.Pod, nodes []Node, scores []int64) *Status
}

// ReservePlugin reserves what the plugin tracks for the pod on nodeName; Unreserve undoes it.
type ReservePlugin interface {
	Plugin
	Reserve(c *Call, pod *pb.Pod, nodeName string) *Status
	Unreserve(c *Call, pod *pb.Pod, nodeName string)
}

// PermitPlugin allows, rejects or holds (Wait, with a timeout) the pod.
type PermitPlugin interface {
	Plugin
	Permit(c *Call, pod *pb.Pod, nodeName string) (*Status, time.Duration)
}

// PreBindPlugin prepares the node before binding; PreBindPreFlight says Skip when PreBind has nothing
// to do for the pod.
type PreBindPlugin interface {
	Plugin
	PreBindPreFlight(c *Call, pod *pb.Pod, nodeName string) *Status
	PreBind(c *Call, pod *pb.Pod, nodeName string) *Status
}

// BindPlugin binds the pod (Skip passes it to the next Bind plugin).
type BindPlugin interface {
	Plugin
	Bind(c *Call, pod *pb.Pod, nodeName string) *Status
}

// PostBindPlugin is told that the pod is bound.
type PostBindPlugin interface {
	Plugin
	PostBind(c *Call, pod *pb.Pod, nodeName string)
}

// Stopper is told when the framework stops the plugin's profile (Plugin.Stop) or the host stops.
type Stopper interface {
	Stop(reason string)
}

// PreFilterExtensionsPlugin is a PreFilterPlugin offering PreFilterExtensions (nil: none).
type PreFilterExtensionsPlugin interface {
	PreFilterExtensions() PreFilterExtensions
}

// Factory builds a plugin instance for one profile from its pluginConfig args (a JSON object, "{}"
// when none were given). An error rejects the configuration with its message.
type Factory func(args json.RawMessage, env *Env) (Plugin, error)

// Env is what a plugin instance is built with besides its args.
type Env struct {
	// Profile is the profile (schedulerName) the instance serves; empty for the instance the host
	// builds at start-up to learn the plugin's extension points.
	Profile string
	// Framework is the current client of the framework's Handle and CycleState services (nil before
	// a handshake named the framework; it changes when a new framework handshakes).
	Framework func() *Framework
	// Mirror is the host's snapshot mirror.
	Mirror *Mirror
}

// Registration is a hosted plugin: its name, its factory and how it wants to be called.
type Registration struct {
	// Name is what profiles call the plugin; unique in the host.
	Name string
	// Factory builds an instance per profile.
	Factory Factory
	// Points are the extension points the plugin implements. Empty: derived from the methods of an
	// instance built with "{}" args when the host starts.
	Points []pb.ExtensionPoint
	// StateKeys are the CycleState keys the plugin reads; their entries come with every request.
	StateKeys []string
	// BatchSize is the preferred number of nodes per Filter/Score batch (0: the framework chooses).
	BatchSize uint32
	// FilterAndScore answers Score inside the Filter exchange.
	FilterAndScore bool
	// NeedsSnapshot makes the host follow the snapshot mirror: batches carry node ids only and every
	// Node has its State. False: batches carry names and Node.State is nil.
	NeedsSnapshot bool
	// NodesOnly says the plugin reads node objects only, never the pods placed on nodes.
	NodesOnly bool
	// Lookahead says the plugin's Filter and Score read only the pod and the nodes' own objects (no
	// CycleState, no pods on nodes, no PreFilter/PreScore): the framework may then ask for its answers
	// for pods ahead of their cycles, over every node (Plugin.Lookahead). Implies NodesOnly.
	Lookahead bool
	// NeedsVolumes says the plugin reads the storage objects behind pods' volumes
	// (PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes): the host's mirror then
	// follows them too, and Call.Snapshot.Volumes() has them. Implies NeedsSnapshot; not allowed with
	// NodesOnly or Lookahead (a storage change alters answers without a node change).
	NeedsVolumes bool
	// NeedsDevices says the plugin reads the device objects of dynamic resource allocation
	// (ResourceSlices, DeviceClasses, ResourceClaims with their allocations): the host's mirror then
	// follows them too, and Call.Snapshot.Devices() has them. Implies NeedsSnapshot; not allowed with
	// NodesOnly or Lookahead (a new slice or another pod's allocation alters answers without a node change).
	NeedsDevices bool
	// Events overrides the events of EnqueueExtensions in the manifest.
	Events []*pb.ClusterEventWithHint
}

// Call is one call of a plugin: the request's context (deadline, cancellation, the call's span), the
// cycle it belongs to and what the plugin may use in it.
type Call struct {
	context.Context
	// Point is the extension point ("Filter", "Reserve", ...).
	Point string
	// Plugin and Profile say which plugin instance is called.
	Plugin, Profile string
	// CycleID is the scheduling context (one pod attempt); empty outside cycles.
	CycleID string
	// Attempt is the pod's scheduling attempt, from 1.
	Attempt uint32
	// State is the cycle's CycleState as the plugin sees it (nil outside cycles).
	State *CycleState
	// Snapshot is the cycle's snapshot with its node view applied (nil unless the plugin follows
	// the mirror).
	Snapshot *Snapshot
	// View is how this call's view of the cluster differs from the snapshot (CycleContext.node_view:
	// a what-if's nodes and pods, preemption's victims removed, transformers' changes); nil: none.
	// Snapshot already has it applied.
	View *pb.NodeView
	// Framework reaches the framework's Handle and CycleState services (nil before a handshake
	// named the framework).
	Framework *Framework
}
