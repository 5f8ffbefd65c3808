package outrigger

import (
	"sort"
	"sync"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// Volumes are the storage objects of the framework's cache as the host's mirror holds them: the
// PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes kube-scheduler's volume
// plugins read through their listers. Only hosts with a plugin registered with NeedsVolumes receive
// them (FollowRequest.volumes); other hosts' Volumes stay empty.
//
// Like an informer's lister, Volumes is live: every Snapshot of a mirror shares the mirror's Volumes,
// which always hold the latest objects the mirror applied (once a cycle's generation is applied, the
// objects of that generation or later). Objects handed out must not be modified. Safe for concurrent use.
type Volumes struct {
	mu       sync.RWMutex
	claims   map[string]*pb.PersistentVolumeClaim // namespace/name
	volumes  map[string]*pb.PersistentVolume
	classes  map[string]*pb.StorageClass
	csinodes map[string]*pb.CSINode
}

func newVolumes() *Volumes {
	return &Volumes{claims: map[string]*pb.PersistentVolumeClaim{}, volumes: map[string]*pb.PersistentVolume{},
		classes: map[string]*pb.StorageClass{}, csinodes: map[string]*pb.CSINode{}}
}

// Claim is the PersistentVolumeClaim namespace/name, or nil.
func (v *Volumes) Claim(namespace, name string) *pb.PersistentVolumeClaim {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.claims[namespace+"/"+name]
}

// Volume is the PersistentVolume name, or nil.
func (v *Volumes) Volume(name string) *pb.PersistentVolume {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.volumes[name]
}

// StorageClass is the StorageClass name, or nil.
func (v *Volumes) StorageClass(name string) *pb.StorageClass {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.classes[name]
}

// CSINode is the CSINode of the node name, or nil.
func (v *Volumes) CSINode(name string) *pb.CSINode {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.csinodes[name]
}

// Claims are every PersistentVolumeClaim, by namespace/name.
func (v *Volumes) Claims() []*pb.PersistentVolumeClaim { return sorted(&v.mu, v.claims) }

// PersistentVolumes are every PersistentVolume, by name.
func (v *Volumes) PersistentVolumes() []*pb.PersistentVolume { return sorted(&v.mu, v.volumes) }

// StorageClasses are every StorageClass, by name.
func (v *Volumes) StorageClasses() []*pb.StorageClass { return sorted(&v.mu, v.classes) }

// CSINodes are every CSINode, by name.
func (v *Volumes) CSINodes() []*pb.CSINode { return sorted(&v.mu, v.csinodes) }

// Len is the number of objects held.
func (v *Volumes) Len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.claims) + len(v.volumes) + len(v.classes) + len(v.csinodes)
}

func sorted[T any](mu *sync.RWMutex, m map[string]T) []T {
	mu.RLock()
	defer mu.RUnlock()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

// resync is a full-resync delta at generation holding every object (and no nodes or pods).
func (v *Volumes) resync(generation uint64) *pb.SnapshotDelta {
	d := &pb.SnapshotDelta{Generation: generation, FullResync: true}
	for _, c := range v.Claims() {
		d.StorageUpserts = append(d.StorageUpserts, &pb.StorageObject{Object: &pb.StorageObject_PersistentVolumeClaim{PersistentVolumeClaim: c}})
	}
	for _, p := range v.PersistentVolumes() {
		d.StorageUpserts = append(d.StorageUpserts, &pb.StorageObject{Object: &pb.StorageObject_PersistentVolume{PersistentVolume: p}})
	}
	for _, c := range v.StorageClasses() {
		d.StorageUpserts = append(d.StorageUpserts, &pb.StorageObject{Object: &pb.StorageObject_StorageClass{StorageClass: c}})
	}
	for _, n := range v.CSINodes() {
		d.StorageUpserts = append(d.StorageUpserts, &pb.StorageObject{Object: &pb.StorageObject_CsiNode{CsiNode: n}})
	}
	return d
}

// apply applies a delta's storage removals, then its upserts (the contract's steps 6 and 7).
func (v *Volumes) apply(d *pb.SnapshotDelta) {
	if len(d.GetStorageRemoved()) == 0 && len(d.GetStorageUpserts()) == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, ref := range d.GetStorageRemoved() {
		switch ref.GetKind() {
		case "PersistentVolumeClaim":
			delete(v.claims, ref.GetNamespace()+"/"+ref.GetName())
		case "PersistentVolume":
			delete(v.volumes, ref.GetName())
		case "StorageClass":
			delete(v.classes, ref.GetName())
		case "CSINode":
			delete(v.csinodes, ref.GetName())
		}
	}
	for _, obj := range d.GetStorageUpserts() {
		switch o := obj.GetObject().(type) {
		case *pb.StorageObject_PersistentVolumeClaim:
			meta := o.PersistentVolumeClaim.GetMetadata()
			v.claims[meta.GetNamespace()+"/"+meta.GetName()] = o.PersistentVolumeClaim
		case *pb.StorageObject_PersistentVolume:
			v.volumes[o.PersistentVolume.GetMetadata().GetName()] = o.PersistentVolume
		case *pb.StorageObject_StorageClass:
			v.classes[o.StorageClass.GetMetadata().GetName()] = o.StorageClass
		case *pb.StorageObject_CsiNode:
			v.csinodes[o.CsiNode.GetMetadata().GetName()] = o.CsiNode
		}
	}
}
