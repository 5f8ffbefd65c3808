//go:build !k8s1.34

package kube

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilsets "k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/kube/internal/fwk"
)

// What the adapter implements of kube-scheduler 1.37's interfaces beyond 1.34's (compat_134.go is
// the 1.34 build's side).

// Reject rejects the waiting pod with plugin's message; false when the framework did not have it
// waiting (kube-scheduler's: false when the pod had already been allowed or rejected).
func (w *waitingPod) Reject(plugin, msg string) bool { return w.reject(plugin, msg) }

// Preempt is not available out of process (the contract turns a waiting pod away as Unschedulable
// only, where Preempt would end its wait with an Error status): it does nothing and answers false.
func (w *waitingPod) Preempt(plugin, msg string) bool {
	klog.ErrorS(nil, "WaitingPod.Preempt is not available to a plugin served out of process; the pod keeps waiting",
		"pod", klog.KObj(w.pod), "plugin", plugin, "message", msg)
	return false
}

// nonHostScoped says ni holds pods with required anti-affinity on a topology wider than the node
// (kube-scheduler fills the list with its InterPodAffinityHostnameFastPath feature only).
func nonHostScoped(ni *framework.NodeInfo) bool {
	return len(ni.PodsWithRequiredNonHostScopedAntiAffinity) > 0
}

func (n nodeInfoLister) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	return listsOf(n.l.snapshot()).withRequiredNonHostScopedAntiAffinity, nil
}

// Pod groups (GenericWorkload): the state of a group is read from the snapshot's pods and the group
// cycle the call runs in, the PodGroup is the group cycle's (podgroup.go). Composite pod groups do not
// reach plugins served out of process: the contract carries none, so every lookup answers that the
// group is not found, as kube-scheduler's snapshot does for a group it does not hold.

// PodGroupStates are the states of the pod groups in the snapshot.
func (l *Lister) PodGroupStates() fwk.PodGroupStateLister { return podGroupStates{l} }

// PodGroups finds the PodGroup of the current group cycle (and the API server's with --kubeconfig).
func (l *Lister) PodGroups() fwk.PodGroupLister { return podGroups{l} }

// CompositePodGroupStates finds no composite pod group.
func (l *Lister) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return notFound(fwk.CompositePodGroupStateLister.Get, "state of composite pod group")
}

// CompositePodGroups finds no composite pod group.
func (l *Lister) CompositePodGroups() fwk.CompositePodGroupLister {
	return notFound(fwk.CompositePodGroupLister.Get, "composite pod group")
}

// noGroups is a pod group lister that finds nothing; T is what its Get returns.
type noGroups[T any] struct{ what string }

func (n noGroups[T]) Get(namespace, name string) (T, error) {
	var none T
	return none, fmt.Errorf("%s %s/%s not found: pod groups are not carried to plugins served out of process",
		n.what, namespace, name)
}

// notFound is the noGroups for the lister whose Get is get. T is inferred from get, so this file
// imports no API group that 1.34 lacks (go mod tidy of the 1.34 module reads every file).
func notFound[L, T any](get func(L, string, string) (T, error), what string) noGroups[T] {
	return noGroups[T]{what: what}
}

// SharedDRAManager lists the snapshot mirror's ResourceSlices, DeviceClasses and ResourceClaims
// (dra.go; empty unless the plugin declares NeedsDevices: Config.Devices). kube-scheduler's is never
// nil with DRA on, which 1.37 locks: NodeResourcesFit asks it whether an extended resource is backed
// by a DeviceClass (DRAExtendedResource), and here none is (a class's extendedResourceName is not
// carried), so such resources are the node's allocatable as before.
func (h *Handle) SharedDRAManager() fwk.SharedDRAManager { return mirrorDRA{lister: h.lister} }

// noDRA is the manager, its slice lister and its class resolver; noClaims and noClasses its listers
// (each type has one List and one Get).
type (
	noDRA     struct{}
	noClaims  struct{}
	noClasses struct{}
)

func (noDRA) ResourceClaims() fwk.ResourceClaimTracker     { return noClaims{} }
func (noDRA) ResourceSlices() fwk.ResourceSliceLister      { return noDRA{} }
func (noDRA) DeviceClasses() fwk.DeviceClassLister         { return noClasses{} }
func (noDRA) DeviceClassResolver() fwk.DeviceClassResolver { return noDRA{} }

func (noDRA) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) { return nil, nil }

func (noDRA) GetDeviceClass(v1.ResourceName) *resourceapi.DeviceClass { return nil }

func (noClasses) List() ([]*resourceapi.DeviceClass, error) { return nil, nil }

func (noClasses) Get(name string) (*resourceapi.DeviceClass, error) {
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

func (noClaims) List() ([]*resourceapi.ResourceClaim, error) { return nil, nil }

func (noClaims) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), namespace+"/"+name)
}

func (noClaims) ListAllAllocatedDevices() (utilsets.Set[structured.DeviceID], error) {
	return utilsets.New[structured.DeviceID](), nil
}

func (noClaims) GatherAllocatedState() (*structured.AllocatedState, error) {
	return &structured.AllocatedState{AllocatedDevices: utilsets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: utilsets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection()}, nil
}

var errNoClaims = fmt.Errorf("ResourceClaims are not available to a plugin served out of process")

func (noClaims) SignalClaimPendingAllocation(types.UID, *resourceapi.ResourceClaim) error {
	return errNoClaims
}

func (noClaims) GetPendingAllocation(types.UID) *resourceapi.AllocationResult { return nil }

func (noClaims) MaybeRemoveClaimPendingAllocation(types.UID, bool) bool { return false }

func (noClaims) AssumeClaimAfterAPICall(*resourceapi.ResourceClaim) error { return errNoClaims }

func (noClaims) AssumedClaimRestore(string, string) {}

// setSchedulingGroup gives the pod its spec.schedulingGroup (Kubernetes 1.36+) from the wire.
func setSchedulingGroup(out *v1.Pod, spec *pb.PodSpec) {
	if spec != nil && spec.SchedulingGroup != nil {
		name := spec.GetSchedulingGroup()
		out.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &name}
	}
}
