package kube

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/outrigger"
)

func TestPodVolumesBecomeTheirV1Sources(t *testing.T) {
	pod := Pod(&pb.Pod{Metadata: &pb.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: &pb.PodSpec{Volumes: []*pb.PodVolume{
		{Name: "data", Source: "persistentVolumeClaim", ClaimName: "data-0", ReadOnly: true},
		{Name: "scratch", Source: "ephemeral"},
		{Name: "gce", Source: "gcePersistentDisk", Disk: "disk-1"},
		{Name: "ceph", Source: "rbd", Disk: "img", Pool: "p", Monitors: []string{"m1"}},
		{Name: "model", Source: "image", Disk: "models/llm:v2"},
		{Name: "px", Source: "portworxVolume", Disk: "px-1"},
	}}})
	vols := pod.Spec.Volumes
	got := []any{vols[0].PersistentVolumeClaim.ClaimName, vols[0].PersistentVolumeClaim.ReadOnly, vols[1].Ephemeral != nil,
		vols[2].GCEPersistentDisk.PDName, vols[3].RBD.RBDImage, vols[3].RBD.RBDPool, vols[3].RBD.CephMonitors,
		vols[4].Image.Reference, vols[5].PortworxVolume.VolumeID}
	want := []any{"data-0", true, true, "disk-1", "img", "p", []string{"m1"}, "models/llm:v2", "px-1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("volumes %v, want %v", got, want)
	}
}

func TestTheHandlesStorageListersFollowTheMirror(t *testing.T) {
	f := informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	m := outrigger.NewMirror(0)
	class := "fast"
	var two int32 = 2
	m.Apply(&pb.SnapshotDelta{Generation: 1, FullResync: true, StorageUpserts: []*pb.StorageObject{
		{Object: &pb.StorageObject_PersistentVolumeClaim{PersistentVolumeClaim: &pb.PersistentVolumeClaim{
			Metadata: &pb.ObjectMeta{Name: "data", Namespace: "ns", ResourceVersion: "7"}, StorageClassName: &class,
			VolumeName: "pv-1", OwnerUid: "pod-uid"}}},
	}})
	m.FeedStorage(newStorageIndexers(f).apply) // what the mirror held before is not missed
	m.Apply(&pb.SnapshotDelta{Generation: 2, StorageUpserts: []*pb.StorageObject{
		{Object: &pb.StorageObject_PersistentVolume{PersistentVolume: &pb.PersistentVolume{
			Metadata: &pb.ObjectMeta{Name: "pv-1", Labels: map[string]string{"topology.kubernetes.io/zone": "b"}},
			Source:   "csi", Driver: "d", Disk: "h", NodeAffinity: &pb.NodeSelector{}}}},
		{Object: &pb.StorageObject_CsiNode{CsiNode: &pb.CSINode{Metadata: &pb.ObjectMeta{Name: "n1"},
			Drivers: []*pb.CSINodeDriver{{Name: "d", Allocatable: &two}}}}},
	}})
	pvc, err := f.Core().V1().PersistentVolumeClaims().Lister().PersistentVolumeClaims("ns").Get("data")
	if err != nil {
		t.Fatal(err)
	}
	pv, err := f.Core().V1().PersistentVolumes().Lister().Get("pv-1")
	if err != nil {
		t.Fatal(err)
	}
	cn, err := csiNodes{f.Storage().V1().CSINodes().Lister()}.Get("n1")
	if err != nil {
		t.Fatal(err)
	}
	got := []any{pvc.Spec.VolumeName, *pvc.Spec.StorageClassName, pvc.ResourceVersion, string(pvc.OwnerReferences[0].UID),
		pv.Labels["topology.kubernetes.io/zone"], pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle,
		len(pv.Spec.NodeAffinity.Required.NodeSelectorTerms), *cn.Spec.Drivers[0].Allocatable.Count}
	want := []any{"pv-1", "fast", "7", "pod-uid", "b", "d", "h", 0, int32(2)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listers %v, want %v", got, want)
	}
	m.Apply(&pb.SnapshotDelta{Generation: 3, StorageRemoved: []*pb.StorageObjectRef{
		{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "data"}, {Kind: "PersistentVolume", Name: "pv-1"}}})
	claims, _ := f.Core().V1().PersistentVolumeClaims().Lister().List(labels.Everything())
	volumes, _ := f.Core().V1().PersistentVolumes().Lister().List(labels.Everything())
	if len(claims) != 0 || len(volumes) != 0 {
		t.Fatalf("after removal: %d claims, %d volumes", len(claims), len(volumes))
	}
	m.Apply(&pb.SnapshotDelta{Generation: 9, FullResync: true})
	if nodes, _ := (csiNodes{f.Storage().V1().CSINodes().Lister()}).List(); len(nodes) != 0 {
		t.Fatalf("a resync left %d CSINodes", len(nodes))
	}
}
