package outrigger

import (
	"strconv"
	"sync"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// Devices are the device objects of dynamic resource allocation as the host's mirror holds them: the
// ResourceSlices, DeviceClasses and ResourceClaims kube-scheduler's DynamicResources reads through its
// listers. Only hosts with a plugin registered with NeedsDevices receive them (FollowRequest.devices);
// other hosts' Devices stay empty. Claims are as the scheduler sees them: one an earlier pod's Reserve
// allocated is allocated already, with AllocationAssumed set.
//
// Like an informer's lister, Devices is live: every Snapshot of a mirror shares the mirror's Devices.
// Objects handed out must not be modified. Safe for concurrent use.
type Devices struct {
	mu      sync.RWMutex
	slices  map[string]*pb.ResourceSlice
	classes map[string]*pb.DeviceClass
	claims  map[string]*pb.ResourceClaim // namespace/name
}

func newDevices() *Devices {
	return &Devices{slices: map[string]*pb.ResourceSlice{}, classes: map[string]*pb.DeviceClass{},
		claims: map[string]*pb.ResourceClaim{}}
}

// ResourceSlice is the slice name, or nil.
func (v *Devices) ResourceSlice(name string) *pb.ResourceSlice {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.slices[name]
}

// DeviceClass is the class name, or nil.
func (v *Devices) DeviceClass(name string) *pb.DeviceClass {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.classes[name]
}

// ResourceClaim is the claim namespace/name, or nil.
func (v *Devices) ResourceClaim(namespace, name string) *pb.ResourceClaim {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.claims[namespace+"/"+name]
}

// ResourceSlices are every slice, by name.
func (v *Devices) ResourceSlices() []*pb.ResourceSlice { return sorted(&v.mu, v.slices) }

// DeviceClasses are every class, by name.
func (v *Devices) DeviceClasses() []*pb.DeviceClass { return sorted(&v.mu, v.classes) }

// ResourceClaims are every claim, by namespace/name.
func (v *Devices) ResourceClaims() []*pb.ResourceClaim { return sorted(&v.mu, v.claims) }

// Len is the number of objects held.
func (v *Devices) Len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.slices) + len(v.classes) + len(v.claims)
}

// PodClaim is one entry of a pod's spec.resourceClaims with its claim (nil: not known yet).
type PodClaim struct {
	Entry string
	Claim *pb.ResourceClaim
}

// PodClaims are the pod's claims in spec order: named directly, or made from a template
// (status.resourceClaimStatuses).
func (v *Devices) PodClaims(pod *pb.Pod) []PodClaim {
	var out []PodClaim
	for _, e := range pod.GetSpec().GetResourceClaims() {
		name := e.GetResourceClaimName()
		if name == "" {
			name = pod.GetStatus().GetResourceClaimStatuses()[e.GetName()]
		}
		var c *pb.ResourceClaim
		if name != "" {
			c = v.ResourceClaim(pod.GetMetadata().GetNamespace(), name)
		}
		out = append(out, PodClaim{Entry: e.GetName(), Claim: c})
	}
	return out
}

// CurrentSlices are the slices of each pool's newest generation, by name (older ones are being
// replaced and do not count).
func (v *Devices) CurrentSlices() []*pb.ResourceSlice {
	all := v.ResourceSlices()
	newest := map[string]int64{}
	for _, s := range all {
		k := s.GetDriver() + "/" + s.GetPool()
		if g, ok := newest[k]; !ok || s.GetPoolGeneration() > g {
			newest[k] = s.GetPoolGeneration()
		}
	}
	out := all[:0:0]
	for _, s := range all {
		if s.GetPoolGeneration() == newest[s.GetDriver()+"/"+s.GetPool()] {
			out = append(out, s)
		}
	}
	return out
}

// DeviceID is a device's identity: "driver/pool/device".
func DeviceID(driver, pool, device string) string { return driver + "/" + pool + "/" + device }

// NodeDevice is a device usable on a node, with the slice that publishes it.
type NodeDevice struct {
	ID     string
	Slice  *pb.ResourceSlice
	Device *pb.Device
}

// NodeDevices are the devices of the current slices usable on node (by nodeName, allNodes,
// nodeSelector or per-device selection), by slice name then device order.
func (v *Devices) NodeDevices(node *pb.Node) []NodeDevice {
	var out []NodeDevice
	for _, s := range v.CurrentSlices() {
		per := s.GetPerDeviceNodeSelection()
		if !per && !onNode(node, s.GetNodeName(), s.GetAllNodes(), s.GetNodeSelector()) {
			continue
		}
		for _, d := range s.GetDevices() {
			if per && !onNode(node, d.GetNodeName(), d.GetAllNodes(), d.GetNodeSelector()) {
				continue
			}
			out = append(out, NodeDevice{ID: DeviceID(s.GetDriver(), s.GetPool(), d.GetName()), Slice: s, Device: d})
		}
	}
	return out
}

// Allocated maps each device id some claim holds (assumed allocations included, admin access not) to
// those claims.
func (v *Devices) Allocated() map[string][]*pb.ResourceClaim {
	out := map[string][]*pb.ResourceClaim{}
	for _, c := range v.ResourceClaims() {
		for _, r := range c.GetAllocation().GetResults() {
			if !r.GetAdminAccess() {
				id := DeviceID(r.GetDriver(), r.GetPool(), r.GetDevice())
				out[id] = append(out[id], c)
			}
		}
	}
	return out
}

// InUseOnNode are the devices usable on node that some claim holds.
func (v *Devices) InUseOnNode(node *pb.Node) []NodeDevice {
	taken := v.Allocated()
	var out []NodeDevice
	for _, d := range v.NodeDevices(node) {
		if _, ok := taken[d.ID]; ok {
			out = append(out, d)
		}
	}
	return out
}

// FreeOnNode are the devices usable on node that no claim holds (shared devices count as free).
func (v *Devices) FreeOnNode(node *pb.Node) []NodeDevice {
	taken := v.Allocated()
	var out []NodeDevice
	for _, d := range v.NodeDevices(node) {
		if _, ok := taken[d.ID]; !ok || d.Device.GetAllowMultipleAllocations() {
			out = append(out, d)
		}
	}
	return out
}

func onNode(node *pb.Node, nodeName string, all bool, sel *pb.NodeSelector) bool {
	switch {
	case nodeName != "":
		return nodeName == node.GetMetadata().GetName()
	case all:
		return true
	}
	return sel != nil && NodeSelectorMatches(sel, node)
}

// NodeSelectorMatches says whether node matches one of the selector's terms (no terms: no node).
func NodeSelectorMatches(sel *pb.NodeSelector, node *pb.Node) bool {
	labels := node.GetMetadata().GetLabels()
	for _, t := range sel.GetTerms() {
		if len(t.GetMatchExpressions()) == 0 && len(t.GetMatchFields()) == 0 {
			continue
		}
		ok := true
		for _, r := range t.GetMatchExpressions() {
			v, has := labels[r.GetKey()]
			ok = ok && requirementMatches(r, v, has)
		}
		for _, r := range t.GetMatchFields() {
			ok = ok && requirementMatches(r, node.GetMetadata().GetName(), r.GetKey() == "metadata.name")
		}
		if ok {
			return true
		}
	}
	return false
}

func requirementMatches(r *pb.NodeSelectorRequirement, value string, has bool) bool {
	in := func() bool {
		for _, x := range r.GetValues() {
			if x == value {
				return true
			}
		}
		return false
	}
	switch r.GetOperator() {
	case "Exists":
		return has
	case "DoesNotExist":
		return !has
	case "In":
		return has && in()
	case "NotIn":
		return has && !in()
	case "Gt", "Lt":
		if !has || len(r.GetValues()) != 1 {
			return false
		}
		a, err1 := strconv.ParseInt(value, 10, 64)
		b, err2 := strconv.ParseInt(r.GetValues()[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		return (r.GetOperator() == "Gt" && a > b) || (r.GetOperator() == "Lt" && a < b)
	}
	return false
}

// apply applies a delta's device removals, then its upserts (the contract's steps 8 and 9).
func (v *Devices) apply(d *pb.SnapshotDelta) {
	if len(d.GetDeviceRemoved()) == 0 && len(d.GetDeviceUpserts()) == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, ref := range d.GetDeviceRemoved() {
		switch ref.GetKind() {
		case "ResourceSlice":
			delete(v.slices, ref.GetName())
		case "DeviceClass":
			delete(v.classes, ref.GetName())
		case "ResourceClaim":
			delete(v.claims, ref.GetNamespace()+"/"+ref.GetName())
		}
	}
	for _, obj := range d.GetDeviceUpserts() {
		switch o := obj.GetObject().(type) {
		case *pb.DeviceObject_ResourceSlice:
			v.slices[o.ResourceSlice.GetMetadata().GetName()] = o.ResourceSlice
		case *pb.DeviceObject_DeviceClass:
			v.classes[o.DeviceClass.GetMetadata().GetName()] = o.DeviceClass
		case *pb.DeviceObject_ResourceClaim:
			meta := o.ResourceClaim.GetMetadata()
			v.claims[meta.GetNamespace()+"/"+meta.GetName()] = o.ResourceClaim
		}
	}
}
