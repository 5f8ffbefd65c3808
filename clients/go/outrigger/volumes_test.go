package outrigger

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

func claimObj(name, volume string) *pb.StorageObject {
	return &pb.StorageObject{Object: &pb.StorageObject_PersistentVolumeClaim{PersistentVolumeClaim: &pb.PersistentVolumeClaim{
		Metadata: &pb.ObjectMeta{Name: name, Namespace: "ns"}, VolumeName: volume}}}
}

func volumeObj(name, zone string) *pb.StorageObject {
	return &pb.StorageObject{Object: &pb.StorageObject_PersistentVolume{PersistentVolume: &pb.PersistentVolume{
		Metadata: &pb.ObjectMeta{Name: name, Labels: map[string]string{"zone": zone}}}}}
}

func classObj(name string) *pb.StorageObject {
	return &pb.StorageObject{Object: &pb.StorageObject_StorageClass{StorageClass: &pb.StorageClass{
		Metadata: &pb.ObjectMeta{Name: name}, Provisioner: "p-" + name}}}
}

// names are the object names of a delta's upserts.
func names(d *pb.SnapshotDelta) []string {
	out := []string{}
	for _, o := range d.GetStorageUpserts() {
		switch x := o.GetObject().(type) {
		case *pb.StorageObject_PersistentVolumeClaim:
			out = append(out, "pvc:"+x.PersistentVolumeClaim.GetMetadata().GetName())
		case *pb.StorageObject_PersistentVolume:
			out = append(out, "pv:"+x.PersistentVolume.GetMetadata().GetName())
		case *pb.StorageObject_StorageClass:
			out = append(out, "sc:"+x.StorageClass.GetMetadata().GetName())
		}
	}
	return out
}

func TestMirrorKeepsStorageObjectsLiveAcrossSnapshots(t *testing.T) {
	m := NewMirror(0)
	m.Apply(&pb.SnapshotDelta{Generation: 2, FullResync: true, Nodes: []*pb.NodeUpsert{{Id: 1, Node: node("a", nil)}},
		StorageUpserts: []*pb.StorageObject{claimObj("data", ""), classObj("fast")}})
	first := m.Latest()
	if got := first.Volumes().Claim("ns", "data").GetVolumeName(); got != "" {
		t.Fatalf("claim bound to %q before it was", got)
	}
	var fed []string
	m.FeedStorage(func(d *pb.SnapshotDelta) {
		fed = append(fed, strings.Join(append([]string{map[bool]string{true: "resync", false: "delta"}[d.GetFullResync()]}, names(d)...), " "))
	})
	m.Apply(&pb.SnapshotDelta{Generation: 3, StorageUpserts: []*pb.StorageObject{claimObj("data", "pv-1"), volumeObj("pv-1", "b")}})
	m.Apply(&pb.SnapshotDelta{Generation: 4, PodsAdded: []*pb.PodPlacement{placement("p1", 1, "a")}}) // no storage: not fed
	m.Apply(&pb.SnapshotDelta{Generation: 5, StorageRemoved: []*pb.StorageObjectRef{{Kind: "StorageClass", Name: "fast"}}})
	m.Apply(&pb.SnapshotDelta{Generation: 5, StorageRemoved: []*pb.StorageObjectRef{{Kind: "PersistentVolume", Name: "pv-1"}}}) // a replay
	// Live, as a lister: the first snapshot reads the latest objects too.
	v := first.Volumes()
	got := []any{v.Claim("ns", "data").GetVolumeName(), v.Volume("pv-1").GetMetadata().GetLabels()["zone"], v.StorageClass("fast"), v.Len()}
	if want := []any{"pv-1", "b", (*pb.StorageClass)(nil), 2}; !reflect.DeepEqual(got, want) {
		t.Fatalf("volumes = %v, want %v", got, want)
	}
	if want := []string{"resync pvc:data sc:fast", "delta pvc:data pv:pv-1", "delta"}; !reflect.DeepEqual(fed, want) {
		t.Fatalf("fed %q, want %q", fed, want)
	}
	// A resync starts the objects over (and is fed as one).
	m.Apply(&pb.SnapshotDelta{Generation: 9, FullResync: true, StorageUpserts: []*pb.StorageObject{classObj("slow")}})
	v = m.Latest().Volumes()
	if got := []int{v.Len(), len(v.StorageClasses()), len(v.Claims())}; !reflect.DeepEqual(got, []int{1, 1, 0}) {
		t.Fatalf("after a resync: %v", got)
	}
	if fed[len(fed)-1] != "resync sc:slow" {
		t.Fatalf("the resync was fed as %q", fed[len(fed)-1])
	}
}

type filterOnly struct{}

func (filterOnly) Name() string                            { return "F" }
func (filterOnly) Filter(*Call, *pb.Pod, []Node) []*Status { return nil }
func newFilterOnly(json.RawMessage, *Env) (Plugin, error)  { return filterOnly{}, nil }

func TestNeedsVolumesDeclaration(t *testing.T) {
	cases := []struct {
		name string
		reg  Registration
		err  string
	}{
		{"implies the mirror", Registration{Name: "F", Factory: newFilterOnly, NeedsVolumes: true}, ""},
		{"nodes only", Registration{Name: "F", Factory: newFilterOnly, NeedsVolumes: true, NodesOnly: true},
			"plugin F: NeedsVolumes excludes NodesOnly and Lookahead"},
		{"lookahead", Registration{Name: "F", Factory: newFilterOnly, NeedsVolumes: true, Lookahead: true},
			"plugin F: NeedsVolumes excludes NodesOnly and Lookahead"},
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
			if !m.GetNeedsVolumes() || !m.GetNeedsSnapshot() || m.GetNodesOnly() || !h.volumes || !h.follows || h.nodes {
				t.Fatalf("manifest %v, host volumes=%v follows=%v nodes=%v", m, h.volumes, h.follows, h.nodes)
			}
		})
	}
}
