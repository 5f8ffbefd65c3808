//go:build !k8s1.34

package kube

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilsets "k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/kube/internal/fwk"
	"outrigger.dev/clients/go/outrigger"
)

// The DRA objects of the snapshot mirror as kube-scheduler's listers hand them out: an upstream plugin
// that reads ResourceSlices, DeviceClasses or ResourceClaims through its Handle's SharedDRAManager gets
// the mirror's (for a plugin registered with NeedsDevices; others see none). The claim tracker is
// read-only: claims are as the framework's scheduler sees them (allocations its Reserve made included),
// and the in-memory tracking calls DynamicResources' Reserve and PreBind make are refused, as that
// plugin runs in the framework, not here.

// mirrorDRA is the manager, its slice lister and its class lister, over the lister's current snapshot.
type mirrorDRA struct{ lister *Lister }

// mirrorClaims is the claim tracker.
type mirrorClaims struct{ mirrorDRA }

// mirrorClasses is the class lister.
type mirrorClasses struct{ mirrorDRA }

func (m mirrorDRA) devices() *outrigger.Devices {
	if m.lister == nil {
		return outrigger.EmptySnapshot().Devices()
	}
	return m.lister.snapshot().Devices()
}

func (m mirrorDRA) ResourceClaims() fwk.ResourceClaimTracker     { return mirrorClaims{m} }
func (m mirrorDRA) ResourceSlices() fwk.ResourceSliceLister      { return m }
func (m mirrorDRA) DeviceClasses() fwk.DeviceClassLister         { return mirrorClasses{m} }
func (m mirrorDRA) DeviceClassResolver() fwk.DeviceClassResolver { return noDRA{} }

// ListWithDeviceTaintRules lists the mirror's slices (DeviceTaintRules are not modelled).
func (m mirrorDRA) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	var out []*resourceapi.ResourceSlice
	for _, s := range m.devices().ResourceSlices() {
		out = append(out, ResourceSlice(s))
	}
	return out, nil
}

func (m mirrorClasses) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, c := range m.devices().DeviceClasses() {
		out = append(out, DeviceClass(c))
	}
	return out, nil
}

func (m mirrorClasses) Get(name string) (*resourceapi.DeviceClass, error) {
	if c := m.devices().DeviceClass(name); c != nil {
		return DeviceClass(c), nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

func (m mirrorClaims) List() ([]*resourceapi.ResourceClaim, error) {
	var out []*resourceapi.ResourceClaim
	for _, c := range m.devices().ResourceClaims() {
		out = append(out, ResourceClaim(c))
	}
	return out, nil
}

func (m mirrorClaims) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c := m.devices().ResourceClaim(namespace, name); c != nil {
		return ResourceClaim(c), nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), namespace+"/"+name)
}

// ListAllAllocatedDevices are the devices held by claims (not with admin access, not shared).
func (m mirrorClaims) ListAllAllocatedDevices() (utilsets.Set[structured.DeviceID], error) {
	st, err := m.GatherAllocatedState()
	return st.AllocatedDevices, err
}

// GatherAllocatedState: the devices claims hold exclusively, and the shares of shared ones (the
// capacity those shares consume is not aggregated).
func (m mirrorClaims) GatherAllocatedState() (*structured.AllocatedState, error) {
	st := &structured.AllocatedState{AllocatedDevices: utilsets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: utilsets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection()}
	for _, c := range m.devices().ResourceClaims() {
		for _, r := range c.GetAllocation().GetResults() {
			id := structured.MakeDeviceID(r.GetDriver(), r.GetPool(), r.GetDevice())
			switch {
			case r.GetShareId() != "":
				share := types.UID(r.GetShareId())
				st.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, &share))
			case !r.GetAdminAccess():
				st.AllocatedDevices.Insert(id)
			}
		}
	}
	return st, nil
}

func (mirrorClaims) SignalClaimPendingAllocation(types.UID, *resourceapi.ResourceClaim) error {
	return errNoClaims
}

func (mirrorClaims) GetPendingAllocation(types.UID) *resourceapi.AllocationResult { return nil }

func (mirrorClaims) MaybeRemoveClaimPendingAllocation(types.UID, bool) bool { return false }

func (mirrorClaims) AssumeClaimAfterAPICall(*resourceapi.ResourceClaim) error { return errNoClaims }

func (mirrorClaims) AssumedClaimRestore(string, string) {}

// ---- conversions -----------------------------------------------------------------------------------

func ptr[T any](v T) *T { return &v }

func optional[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

func quantities[K ~string](m map[string]string) map[K]resource.Quantity {
	if len(m) == 0 {
		return nil
	}
	out := map[K]resource.Quantity{}
	for k, v := range m {
		if q, err := resource.ParseQuantity(v); err == nil {
			out[K(k)] = q
		}
	}
	return out
}

func counters(m map[string]string) map[string]resourceapi.Counter {
	out := map[string]resourceapi.Counter{}
	for k, q := range quantities[string](m) {
		out[k] = resourceapi.Counter{Value: q}
	}
	return out
}

func nodeSelector(s *pb.NodeSelector) *v1.NodeSelector {
	if s == nil {
		return nil
	}
	out := &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{}}
	for _, t := range s.GetTerms() {
		out.NodeSelectorTerms = append(out.NodeSelectorTerms, nodeSelectorTerm(t))
	}
	return out
}

func attribute(a *pb.DeviceAttribute) resourceapi.DeviceAttribute {
	switch v := a.GetValue().(type) {
	case *pb.DeviceAttribute_Int:
		return resourceapi.DeviceAttribute{IntValue: ptr(v.Int)}
	case *pb.DeviceAttribute_Bool:
		return resourceapi.DeviceAttribute{BoolValue: ptr(v.Bool)}
	case *pb.DeviceAttribute_String_:
		return resourceapi.DeviceAttribute{StringValue: ptr(v.String_)}
	case *pb.DeviceAttribute_Version:
		return resourceapi.DeviceAttribute{VersionValue: ptr(v.Version)}
	}
	return resourceapi.DeviceAttribute{}
}

func device(d *pb.Device) resourceapi.Device {
	out := resourceapi.Device{Name: d.GetName(), NodeName: optional(d.GetNodeName()), NodeSelector: nodeSelector(d.GetNodeSelector()),
		AllNodes: optional(d.GetAllNodes()), BindsToNode: optional(d.GetBindsToNode()),
		AllowMultipleAllocations: optional(d.GetAllowMultipleAllocations())}
	if len(d.GetAttributes()) > 0 {
		out.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
		for k, a := range d.GetAttributes() {
			out.Attributes[resourceapi.QualifiedName(k)] = attribute(a)
		}
	}
	if caps := quantities[resourceapi.QualifiedName](d.GetCapacity()); caps != nil {
		out.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
		for k, q := range caps {
			out.Capacity[k] = resourceapi.DeviceCapacity{Value: q}
		}
	}
	for _, c := range d.GetConsumesCounters() {
		out.ConsumesCounters = append(out.ConsumesCounters, resourceapi.DeviceCounterConsumption{CounterSet: c.GetName(), Counters: counters(c.GetCounters())})
	}
	for _, t := range d.GetTaints() {
		out.Taints = append(out.Taints, resourceapi.DeviceTaint{Key: t.GetKey(), Value: t.GetValue(), Effect: resourceapi.DeviceTaintEffect(t.GetEffect())})
	}
	return out
}

// ResourceSlice is a mirrored slice as a resource.k8s.io/v1 object.
func ResourceSlice(s *pb.ResourceSlice) *resourceapi.ResourceSlice {
	out := &resourceapi.ResourceSlice{ObjectMeta: storageMeta(s.GetMetadata()), Spec: resourceapi.ResourceSliceSpec{
		Driver: s.GetDriver(), Pool: resourceapi.ResourcePool{Name: s.GetPool(), Generation: s.GetPoolGeneration(), ResourceSliceCount: s.GetPoolSliceCount()},
		NodeName: optional(s.GetNodeName()), NodeSelector: nodeSelector(s.GetNodeSelector()), AllNodes: optional(s.GetAllNodes()),
		PerDeviceNodeSelection: optional(s.GetPerDeviceNodeSelection()),
	}}
	out.Kind, out.APIVersion = "ResourceSlice", resourceapi.SchemeGroupVersion.String()
	for _, d := range s.GetDevices() {
		out.Spec.Devices = append(out.Spec.Devices, device(d))
	}
	for _, c := range s.GetSharedCounters() {
		out.Spec.SharedCounters = append(out.Spec.SharedCounters, resourceapi.CounterSet{Name: c.GetName(), Counters: counters(c.GetCounters())})
	}
	return out
}

func selectors(exprs []string) []resourceapi.DeviceSelector {
	var out []resourceapi.DeviceSelector
	for _, e := range exprs {
		out = append(out, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	return out
}

func opaque(c *pb.OpaqueDeviceConfig) resourceapi.DeviceConfiguration {
	raw := []byte(c.GetParametersJson())
	if !json.Valid(raw) {
		raw = nil
	}
	return resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: c.GetDriver(), Parameters: runtime.RawExtension{Raw: raw}}}
}

// DeviceClass is a mirrored class as a resource.k8s.io/v1 object.
func DeviceClass(c *pb.DeviceClass) *resourceapi.DeviceClass {
	out := &resourceapi.DeviceClass{ObjectMeta: storageMeta(c.GetMetadata()), Spec: resourceapi.DeviceClassSpec{Selectors: selectors(c.GetSelectors())}}
	out.Kind, out.APIVersion = "DeviceClass", resourceapi.SchemeGroupVersion.String()
	for _, cfg := range c.GetConfig() {
		out.Spec.Config = append(out.Spec.Config, resourceapi.DeviceClassConfiguration{DeviceConfiguration: opaque(cfg)})
	}
	return out
}

func tolerations(ts []*pb.DeviceToleration) []resourceapi.DeviceToleration {
	var out []resourceapi.DeviceToleration
	for _, t := range ts {
		out = append(out, resourceapi.DeviceToleration{Key: t.GetKey(), Operator: resourceapi.DeviceTolerationOperator(t.GetOperator()),
			Value: t.GetValue(), Effect: resourceapi.DeviceTaintEffect(t.GetEffect())})
	}
	return out
}

func capacityRequests(m map[string]string) *resourceapi.CapacityRequirements {
	if q := quantities[resourceapi.QualifiedName](m); q != nil {
		return &resourceapi.CapacityRequirements{Requests: q}
	}
	return nil
}

func deviceRequest(r *pb.DeviceRequest) resourceapi.DeviceRequest {
	out := resourceapi.DeviceRequest{Name: r.GetName()}
	if e := r.GetExactly(); e != nil {
		out.Exactly = &resourceapi.ExactDeviceRequest{DeviceClassName: e.GetDeviceClassName(), Selectors: selectors(e.GetSelectors()),
			AllocationMode: resourceapi.DeviceAllocationMode(e.GetAllocationMode()), Count: e.GetCount(), AdminAccess: optional(e.GetAdminAccess()),
			Tolerations: tolerations(e.GetTolerations()), Capacity: capacityRequests(e.GetCapacity())}
	}
	for _, s := range r.GetFirstAvailable() {
		out.FirstAvailable = append(out.FirstAvailable, resourceapi.DeviceSubRequest{Name: s.GetName(), DeviceClassName: s.GetDeviceClassName(),
			Selectors: selectors(s.GetSelectors()), AllocationMode: resourceapi.DeviceAllocationMode(s.GetAllocationMode()), Count: s.GetCount(),
			Tolerations: tolerations(s.GetTolerations()), Capacity: capacityRequests(s.GetCapacity())})
	}
	return out
}

// ResourceClaim is a mirrored claim as a resource.k8s.io/v1 object (an assumed allocation is its
// status.allocation, as kube-scheduler's claim tracker lists it).
func ResourceClaim(c *pb.ResourceClaim) *resourceapi.ResourceClaim {
	out := &resourceapi.ResourceClaim{ObjectMeta: storageMeta(c.GetMetadata())}
	out.Kind, out.APIVersion = "ResourceClaim", resourceapi.SchemeGroupVersion.String()
	if o := c.GetOwner(); o != nil {
		out.OwnerReferences = append(out.OwnerReferences, ownerRef(o))
	}
	for _, r := range c.GetRequests() {
		out.Spec.Devices.Requests = append(out.Spec.Devices.Requests, deviceRequest(r))
	}
	for _, k := range c.GetConstraints() {
		out.Spec.Devices.Constraints = append(out.Spec.Devices.Constraints, resourceapi.DeviceConstraint{Requests: k.GetRequests(),
			MatchAttribute:    optional(resourceapi.FullyQualifiedName(k.GetMatchAttribute())),
			DistinctAttribute: optional(resourceapi.FullyQualifiedName(k.GetDistinctAttribute()))})
	}
	for _, cfg := range c.GetConfig() {
		out.Spec.Devices.Config = append(out.Spec.Devices.Config, resourceapi.DeviceClaimConfiguration{Requests: cfg.GetRequests(), DeviceConfiguration: opaque(cfg)})
	}
	if a := c.GetAllocation(); a != nil {
		alloc := &resourceapi.AllocationResult{NodeSelector: nodeSelector(a.GetNodeSelector())}
		for _, r := range a.GetResults() {
			res := resourceapi.DeviceRequestAllocationResult{Request: r.GetRequest(), Driver: r.GetDriver(), Pool: r.GetPool(), Device: r.GetDevice(),
				AdminAccess: optional(r.GetAdminAccess()), ConsumedCapacity: quantities[resourceapi.QualifiedName](r.GetConsumedCapacity())}
			if r.GetShareId() != "" {
				res.ShareID = ptr(types.UID(r.GetShareId()))
			}
			alloc.Devices.Results = append(alloc.Devices.Results, res)
		}
		out.Status.Allocation = alloc
	}
	for _, r := range c.GetReservedFor() {
		out.Status.ReservedFor = append(out.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: r.GetResource(), Name: r.GetName(), UID: types.UID(r.GetUid())})
	}
	return out
}

func ownerRef(o *pb.ClaimConsumer) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: o.GetResource(), Name: o.GetName(), UID: types.UID(o.GetUid()), Controller: ptr(true)}
}
