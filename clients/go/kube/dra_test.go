//go:build !k8s1.34

package kube

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilsets "k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/outrigger"
)

const draDriver = "gpu.example.com"

func draDelta() *pb.SnapshotDelta {
	slice := &pb.ResourceSlice{Metadata: &pb.ObjectMeta{Name: "n1-gpus"}, Driver: draDriver, Pool: "n1", PoolGeneration: 2, PoolSliceCount: 1, NodeName: "n1",
		Devices: []*pb.Device{
			{Name: "gpu0", Attributes: map[string]*pb.DeviceAttribute{"numaNode": {Value: &pb.DeviceAttribute_Int{Int: 1}}, "model": {Value: &pb.DeviceAttribute_String_{String_: "a100"}}},
				Capacity: map[string]string{"memory": "42949672960"}},
			{Name: "gpu1", AllowMultipleAllocations: true, Taints: []*pb.DeviceTaint{{Key: "maintenance", Effect: "NoSchedule"}}},
		}}
	class := &pb.DeviceClass{Metadata: &pb.ObjectMeta{Name: "gpu"}, Selectors: []string{`device.driver == "gpu.example.com"`},
		Config: []*pb.OpaqueDeviceConfig{{Driver: draDriver, ParametersJson: `{"a":1}`}}}
	claim := &pb.ResourceClaim{Metadata: &pb.ObjectMeta{Name: "c", Namespace: "ns", Uid: "uid-c", ResourceVersion: "7"}, AllocationAssumed: true,
		Requests:    []*pb.DeviceRequest{{Name: "gpu", Exactly: &pb.DeviceSubRequest{Name: "gpu", DeviceClassName: "gpu", AllocationMode: "ExactCount", Count: 2}}},
		Constraints: []*pb.DeviceConstraint{{Requests: []string{"gpu"}, MatchAttribute: "gpu.example.com/numaNode"}},
		Allocation: &pb.DeviceAllocation{Results: []*pb.DeviceAllocationResult{
			{Request: "gpu", Driver: draDriver, Pool: "n1", Device: "gpu0"},
			{Request: "gpu", Driver: draDriver, Pool: "n1", Device: "gpu1", ShareId: "s-1", ConsumedCapacity: map[string]string{"memory": "1500m"}},
		}, NodeSelector: &pb.NodeSelector{Terms: []*pb.NodeSelectorTerm{{MatchFields: []*pb.NodeSelectorRequirement{{Key: "metadata.name", Operator: "In", Values: []string{"n1"}}}}}}},
		ReservedFor: []*pb.ClaimConsumer{{Resource: "pods", Name: "p", Uid: "uid-p"}},
		Owner:       &pb.ClaimConsumer{Resource: "Pod", Name: "p", Uid: "uid-p"},
	}
	return &pb.SnapshotDelta{Generation: 3, FullResync: true, Nodes: []*pb.NodeUpsert{{Id: 1, Node: &pb.Node{Metadata: &pb.ObjectMeta{Name: "n1"}}}},
		DeviceUpserts: []*pb.DeviceObject{{Object: &pb.DeviceObject_ResourceSlice{ResourceSlice: slice}},
			{Object: &pb.DeviceObject_DeviceClass{DeviceClass: class}}, {Object: &pb.DeviceObject_ResourceClaim{ResourceClaim: claim}}}}
}

func TestTheHandlesDRAManagerListsTheMirrorsDeviceObjects(t *testing.T) {
	m := outrigger.NewMirror(0)
	m.Apply(draDelta())
	l := &Lister{}
	l.Set(m.Latest())
	dra := (&Handle{lister: l}).SharedDRAManager()

	slices, err := dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil || len(slices) != 1 {
		t.Fatalf("slices %v, %v", slices, err)
	}
	s := slices[0].Spec
	gpu0 := s.Devices[0]
	memory := gpu0.Capacity["memory"].Value
	got := []any{slices[0].Name, s.Driver, s.Pool, *s.NodeName, s.AllNodes, *gpu0.Attributes["numaNode"].IntValue, *gpu0.Attributes["model"].StringValue,
		memory.Value(), *s.Devices[1].AllowMultipleAllocations, s.Devices[1].Taints[0].Effect}
	want := []any{"n1-gpus", draDriver, resourceapi.ResourcePool{Name: "n1", Generation: 2, ResourceSliceCount: 1}, "n1", (*bool)(nil), int64(1), "a100",
		int64(40 << 30), true, resourceapi.DeviceTaintEffectNoSchedule}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("slice %v, want %v", got, want)
	}

	class, err := dra.DeviceClasses().Get("gpu")
	if err != nil || class.Spec.Selectors[0].CEL.Expression != `device.driver == "gpu.example.com"` || string(class.Spec.Config[0].Opaque.Parameters.Raw) != `{"a":1}` {
		t.Errorf("class %+v, %v", class, err)
	}
	if _, err := dra.DeviceClasses().Get("fpga"); !apierrors.IsNotFound(err) {
		t.Errorf("an unknown class: %v, want NotFound", err)
	}

	claim, err := dra.ResourceClaims().Get("ns", "c")
	if err != nil {
		t.Fatal(err)
	}
	share := types.UID("s-1")
	wantStatus := resourceapi.ResourceClaimStatus{
		Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: draDriver, Pool: "n1", Device: "gpu0"},
				{Request: "gpu", Driver: draDriver, Pool: "n1", Device: "gpu1", ShareID: &share,
					ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("1500m")}},
			}},
			NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: "In", Values: []string{"n1"}}}}}},
		},
		ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "uid-p"}},
	}
	if !reflect.DeepEqual(claim.Status, wantStatus) {
		t.Errorf("claim status %+v, want %+v", claim.Status, wantStatus)
	}
	yes := true
	match := resourceapi.FullyQualifiedName("gpu.example.com/numaNode")
	gotSpec := []any{claim.UID, claim.ResourceVersion, claim.OwnerReferences, claim.Spec.Devices.Requests[0].Exactly.Count, claim.Spec.Devices.Constraints}
	wantSpec := []any{types.UID("uid-c"), "7", []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-p", Controller: &yes}}, int64(2),
		[]resourceapi.DeviceConstraint{{Requests: []string{"gpu"}, MatchAttribute: &match}}}
	if !reflect.DeepEqual(gotSpec, wantSpec) {
		t.Errorf("claim %v, want %v", gotSpec, wantSpec)
	}

	state, err := dra.ResourceClaims().GatherAllocatedState()
	gpu0ID := structured.MakeDeviceID(draDriver, "n1", "gpu0")
	if err != nil || !state.AllocatedDevices.Equal(utilsets.New(gpu0ID)) ||
		!state.AllocatedSharedDeviceIDs.Equal(utilsets.New(structured.MakeSharedDeviceID(structured.MakeDeviceID(draDriver, "n1", "gpu1"), &share))) {
		t.Errorf("allocated state %+v, %v", state, err)
	}
	if err := dra.ResourceClaims().SignalClaimPendingAllocation("uid-c", claim); err == nil {
		t.Error("SignalClaimPendingAllocation accepted: the tracker is read-only out of process")
	}
	// The claims follow the mirror (a lister is live): gone with it.
	m.Apply(&pb.SnapshotDelta{Generation: 4, DeviceRemoved: []*pb.DeviceObjectRef{{Kind: "ResourceClaim", Namespace: "ns", Name: "c"}}})
	l.Set(m.Latest())
	if _, err := dra.ResourceClaims().Get("ns", "c"); !apierrors.IsNotFound(err) {
		t.Errorf("a removed claim: %v, want NotFound", err)
	}
	if devs, _ := dra.ResourceClaims().ListAllAllocatedDevices(); devs.Len() != 0 {
		t.Errorf("allocated after the claim went: %v", devs)
	}
}
