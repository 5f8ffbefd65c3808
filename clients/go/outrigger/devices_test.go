package outrigger

import (
	"reflect"
	"strings"
	"testing"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

const gpuDriver = "gpu.example.com"

func gpuDevice(name string, numa int64) *pb.Device {
	return &pb.Device{Name: name, Attributes: map[string]*pb.DeviceAttribute{
		"numaNode": {Value: &pb.DeviceAttribute_Int{Int: numa}}}}
}

func sliceObj(name, pool string, generation int64, s *pb.ResourceSlice) *pb.DeviceObject {
	s.Metadata, s.Driver, s.Pool, s.PoolGeneration, s.PoolSliceCount = &pb.ObjectMeta{Name: name}, gpuDriver, pool, generation, 1
	return &pb.DeviceObject{Object: &pb.DeviceObject_ResourceSlice{ResourceSlice: s}}
}

func deviceClassObj(name string) *pb.DeviceObject {
	return &pb.DeviceObject{Object: &pb.DeviceObject_DeviceClass{DeviceClass: &pb.DeviceClass{
		Metadata: &pb.ObjectMeta{Name: name}, Selectors: []string{`device.driver == "gpu.example.com"`}}}}
}

func resourceClaimObj(name string, assumed bool, devices ...[2]string) *pb.DeviceObject {
	c := &pb.ResourceClaim{Metadata: &pb.ObjectMeta{Name: name, Namespace: "ns"}, AllocationAssumed: assumed}
	if len(devices) > 0 {
		c.Allocation = &pb.DeviceAllocation{}
		for _, d := range devices {
			c.Allocation.Results = append(c.Allocation.Results, &pb.DeviceAllocationResult{Request: "gpu", Driver: gpuDriver, Pool: d[0], Device: d[1]})
		}
	}
	return &pb.DeviceObject{Object: &pb.DeviceObject_ResourceClaim{ResourceClaim: c}}
}

func ids(devices []NodeDevice) []string {
	out := []string{}
	for _, d := range devices {
		out = append(out, d.ID)
	}
	return out
}

func TestMirrorKeepsDeviceObjectsLiveAcrossSnapshots(t *testing.T) {
	m := NewMirror(0)
	m.Apply(&pb.SnapshotDelta{Generation: 2, FullResync: true, Nodes: []*pb.NodeUpsert{{Id: 1, Node: node("n1", nil)}},
		DeviceUpserts: []*pb.DeviceObject{deviceClassObj("gpu"), sliceObj("n1-gpus", "n1", 1, &pb.ResourceSlice{NodeName: "n1", Devices: []*pb.Device{gpuDevice("gpu0", 0)}})}})
	first := m.Latest()
	m.Apply(&pb.SnapshotDelta{Generation: 3, DeviceUpserts: []*pb.DeviceObject{resourceClaimObj("c", true, [2]string{"n1", "gpu0"})}})
	m.Apply(&pb.SnapshotDelta{Generation: 4, DeviceRemoved: []*pb.DeviceObjectRef{{Kind: "DeviceClass", Name: "gpu"}}})
	m.Apply(&pb.SnapshotDelta{Generation: 4, DeviceRemoved: []*pb.DeviceObjectRef{{Kind: "ResourceSlice", Name: "n1-gpus"}}}) // a replay
	// Live, as a lister: the first snapshot reads the latest objects too.
	v := first.Devices()
	got := []any{v.DeviceClass("gpu"), v.ResourceSlice("n1-gpus").GetDevices()[0].GetAttributes()["numaNode"].GetInt(),
		v.ResourceClaim("ns", "c").GetAllocationAssumed(), ids(v.InUseOnNode(node("n1", nil))), v.Len()}
	if want := []any{(*pb.DeviceClass)(nil), int64(0), true, []string{"gpu.example.com/n1/gpu0"}, 2}; !reflect.DeepEqual(got, want) {
		t.Fatalf("devices = %v, want %v", got, want)
	}
	m.Apply(&pb.SnapshotDelta{Generation: 5, DeviceRemoved: []*pb.DeviceObjectRef{{Kind: "ResourceClaim", Namespace: "ns", Name: "c"}}})
	if got := ids(v.InUseOnNode(node("n1", nil))); len(got) != 0 {
		t.Fatalf("in use after the claim went: %v", got)
	}
	// A resync starts the objects over.
	m.Apply(&pb.SnapshotDelta{Generation: 9, FullResync: true, DeviceUpserts: []*pb.DeviceObject{deviceClassObj("other")}})
	v = m.Latest().Devices()
	if got := []int{v.Len(), len(v.DeviceClasses()), len(v.ResourceSlices())}; !reflect.DeepEqual(got, []int{1, 1, 0}) {
		t.Fatalf("after a resync: %v", got)
	}
}

func TestDevicesPerNodeViews(t *testing.T) {
	rack := &pb.NodeSelector{Terms: []*pb.NodeSelectorTerm{{MatchExpressions: []*pb.NodeSelectorRequirement{{Key: "rack", Operator: "In", Values: []string{"r1"}}}}}}
	shared := gpuDevice("shared", 3)
	shared.AllowMultipleAllocations = true
	d0, d1 := gpuDevice("d0", 2), gpuDevice("d1", 2)
	d0.NodeName, d1.AllNodes = "n2", true
	m := NewMirror(0)
	m.Apply(&pb.SnapshotDelta{Generation: 1, FullResync: true, DeviceUpserts: []*pb.DeviceObject{
		sliceObj("n1-old", "n1", 1, &pb.ResourceSlice{NodeName: "n1", Devices: []*pb.Device{gpuDevice("stale", 0)}}),
		sliceObj("n1-new", "n1", 2, &pb.ResourceSlice{NodeName: "n1", Devices: []*pb.Device{gpuDevice("gpu0", 0), gpuDevice("gpu1", 0)}}),
		sliceObj("rack", "rack", 1, &pb.ResourceSlice{NodeSelector: rack, Devices: []*pb.Device{gpuDevice("r0", 1)}}),
		sliceObj("per-device", "pd", 1, &pb.ResourceSlice{PerDeviceNodeSelection: true, Devices: []*pb.Device{d0, d1}}),
		sliceObj("everywhere", "all", 1, &pb.ResourceSlice{AllNodes: true, Devices: []*pb.Device{shared}}),
		resourceClaimObj("held", false, [2]string{"n1", "gpu0"}, [2]string{"all", "shared"}),
		resourceClaimObj("reserving", true, [2]string{"n1", "gpu1"}),
	}})
	v := m.Latest().Devices()
	n1 := node("n1", map[string]string{"rack": "r1"})
	cases := []struct {
		name string
		got  []string
		want []string
	}{
		{"usable on n1", ids(v.NodeDevices(n1)), []string{"gpu.example.com/all/shared", "gpu.example.com/n1/gpu0", "gpu.example.com/n1/gpu1", "gpu.example.com/pd/d1", "gpu.example.com/rack/r0"}},
		{"usable on n2", ids(v.NodeDevices(node("n2", nil))), []string{"gpu.example.com/all/shared", "gpu.example.com/pd/d0", "gpu.example.com/pd/d1"}},
		{"in use on n1", ids(v.InUseOnNode(n1)), []string{"gpu.example.com/all/shared", "gpu.example.com/n1/gpu0", "gpu.example.com/n1/gpu1"}},
		{"free on n1", ids(v.FreeOnNode(n1)), []string{"gpu.example.com/all/shared", "gpu.example.com/pd/d1", "gpu.example.com/rack/r0"}},
	}
	for _, c := range cases {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	pod := &pb.Pod{Metadata: &pb.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec:   &pb.PodSpec{ResourceClaims: []*pb.PodResourceClaim{{Name: "a", ResourceClaimName: "held"}, {Name: "b", ResourceClaimTemplateName: "t"}, {Name: "c", ResourceClaimTemplateName: "t"}}},
		Status: &pb.PodStatus{ResourceClaimStatuses: map[string]string{"b": "reserving"}}}
	got := []string{}
	for _, pc := range v.PodClaims(pod) {
		got = append(got, pc.Entry+"="+pc.Claim.GetMetadata().GetName())
	}
	if want := []string{"a=held", "b=reserving", "c="}; !reflect.DeepEqual(got, want) {
		t.Fatalf("pod claims %v, want %v", got, want)
	}
}

func TestNeedsDevicesDeclaration(t *testing.T) {
	cases := []struct {
		name string
		reg  Registration
		err  string
	}{
		{"implies the mirror", Registration{Name: "F", Factory: newFilterOnly, NeedsDevices: true}, ""},
		{"nodes only", Registration{Name: "F", Factory: newFilterOnly, NeedsDevices: true, NodesOnly: true},
			"plugin F: NeedsDevices excludes NodesOnly and Lookahead"},
		{"lookahead", Registration{Name: "F", Factory: newFilterOnly, NeedsDevices: true, Lookahead: true},
			"plugin F: NeedsDevices excludes NodesOnly and Lookahead"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := NewHost([]Registration{c.reg}, Options{})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m := h.plugins[0].manifest
			if !m.GetNeedsDevices() || !m.GetNeedsSnapshot() || m.GetNodesOnly() || !h.devices || !h.follows || h.nodes {
				t.Fatalf("manifest %v, host devices=%v follows=%v nodes=%v", m, h.devices, h.follows, h.nodes)
			}
		})
	}
}
