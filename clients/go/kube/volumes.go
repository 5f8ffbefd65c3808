package kube

import (
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// ---- pod volumes ----------------------------------------------------------------------------------

// Volume is a pod's volume as a v1.Volume: the source PodVolume.source names, with the fields the
// contract carries (an ephemeral volume's claim template is empty: only its presence matters to
// scheduling, its claim is named <pod>-<volume>).
func Volume(v *pb.PodVolume) v1.Volume {
	out := v1.Volume{Name: v.GetName()}
	ro := v.GetReadOnly()
	switch v.GetSource() {
	case "persistentVolumeClaim":
		out.PersistentVolumeClaim = &v1.PersistentVolumeClaimVolumeSource{ClaimName: v.GetClaimName(), ReadOnly: ro}
	case "ephemeral":
		out.Ephemeral = &v1.EphemeralVolumeSource{VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{}}
	case "csi":
		out.CSI = &v1.CSIVolumeSource{Driver: v.GetDriver(), ReadOnly: &ro}
	case "gcePersistentDisk":
		out.GCEPersistentDisk = &v1.GCEPersistentDiskVolumeSource{PDName: v.GetDisk(), ReadOnly: ro}
	case "awsElasticBlockStore":
		out.AWSElasticBlockStore = &v1.AWSElasticBlockStoreVolumeSource{VolumeID: v.GetDisk(), ReadOnly: ro}
	case "iscsi":
		out.ISCSI = &v1.ISCSIVolumeSource{IQN: v.GetDisk(), ReadOnly: ro}
	case "rbd":
		out.RBD = &v1.RBDVolumeSource{RBDImage: v.GetDisk(), RBDPool: v.GetPool(), CephMonitors: v.GetMonitors(), ReadOnly: ro}
	case "azureDisk":
		out.AzureDisk = &v1.AzureDiskVolumeSource{DataDiskURI: v.GetDisk(), ReadOnly: &ro}
	case "cinder":
		out.Cinder = &v1.CinderVolumeSource{VolumeID: v.GetDisk(), ReadOnly: ro}
	case "portworxVolume":
		out.PortworxVolume = &v1.PortworxVolumeSource{VolumeID: v.GetDisk(), ReadOnly: ro}
	case "image":
		out.Image = &v1.ImageVolumeSource{Reference: v.GetDisk()}
	}
	return out
}

// ---- storage objects --------------------------------------------------------------------------------

func storageMeta(m *pb.ObjectMeta) metav1.ObjectMeta {
	out := objectMeta(m)
	out.ResourceVersion = m.GetResourceVersion()
	return out
}

// PersistentVolumeClaim is a mirrored claim as a v1 object.
func PersistentVolumeClaim(c *pb.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	out := &v1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"}, ObjectMeta: storageMeta(c.GetMetadata()),
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: accessModes(c.GetAccessModes()), Selector: labelSelector(c.GetSelector()),
			VolumeName: c.GetVolumeName(), StorageClassName: c.StorageClassName,
		},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.PersistentVolumeClaimPhase(c.GetPhase())},
	}
	if c.Storage != nil {
		out.Spec.Resources.Requests = v1.ResourceList{v1.ResourceStorage: *resource.NewQuantity(c.GetStorage(), resource.BinarySI)}
	}
	if m := c.GetVolumeMode(); m != "" {
		mode := v1.PersistentVolumeMode(m)
		out.Spec.VolumeMode = &mode
	}
	if vac := c.GetVolumeAttributesClassName(); vac != "" {
		out.Spec.VolumeAttributesClassName = &vac
	}
	if uid := c.GetOwnerUid(); uid != "" {
		yes := true
		out.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", UID: types.UID(uid), Controller: &yes}}
	}
	return out
}

func accessModes(ms []string) []v1.PersistentVolumeAccessMode {
	out := make([]v1.PersistentVolumeAccessMode, len(ms))
	for i, m := range ms {
		out[i] = v1.PersistentVolumeAccessMode(m)
	}
	return out
}

// PersistentVolume is a mirrored volume as a v1 object (its source as PersistentVolume.source names
// it, with the disk identity the contract carries).
func PersistentVolume(p *pb.PersistentVolume) *v1.PersistentVolume {
	out := &v1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolume", APIVersion: "v1"}, ObjectMeta: storageMeta(p.GetMetadata()),
		Spec: v1.PersistentVolumeSpec{
			Capacity:    v1.ResourceList{v1.ResourceStorage: *resource.NewQuantity(p.GetStorage(), resource.BinarySI)},
			AccessModes: accessModes(p.GetAccessModes()), StorageClassName: p.GetStorageClassName(),
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.PersistentVolumePhase(p.GetPhase())},
	}
	if ref := p.GetClaimRef(); ref != nil {
		out.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
			Namespace: ref.GetNamespace(), Name: ref.GetName(), UID: types.UID(ref.GetUid())}
	}
	if na := p.GetNodeAffinity(); na != nil {
		sel := &v1.NodeSelector{}
		for _, t := range na.GetTerms() {
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, nodeSelectorTerm(t))
		}
		out.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: sel}
	}
	if m := p.GetVolumeMode(); m != "" {
		mode := v1.PersistentVolumeMode(m)
		out.Spec.VolumeMode = &mode
	}
	if vac := p.GetVolumeAttributesClassName(); vac != "" {
		out.Spec.VolumeAttributesClassName = &vac
	}
	src := &out.Spec.PersistentVolumeSource
	switch p.GetSource() {
	case "csi":
		src.CSI = &v1.CSIPersistentVolumeSource{Driver: p.GetDriver(), VolumeHandle: p.GetDisk()}
	case "gcePersistentDisk":
		src.GCEPersistentDisk = &v1.GCEPersistentDiskVolumeSource{PDName: p.GetDisk()}
	case "awsElasticBlockStore":
		src.AWSElasticBlockStore = &v1.AWSElasticBlockStoreVolumeSource{VolumeID: p.GetDisk()}
	case "azureDisk":
		src.AzureDisk = &v1.AzureDiskVolumeSource{DataDiskURI: p.GetDisk()}
	case "cinder":
		src.Cinder = &v1.CinderPersistentVolumeSource{VolumeID: p.GetDisk()}
	case "portworxVolume":
		src.PortworxVolume = &v1.PortworxVolumeSource{VolumeID: p.GetDisk()}
	case "local":
		src.Local = &v1.LocalVolumeSource{}
	case "hostPath":
		src.HostPath = &v1.HostPathVolumeSource{}
	}
	return out
}

// StorageClass is a mirrored class as a storage.k8s.io/v1 object.
func StorageClass(c *pb.StorageClass) *storagev1.StorageClass {
	out := &storagev1.StorageClass{
		TypeMeta: metav1.TypeMeta{Kind: "StorageClass", APIVersion: "storage.k8s.io/v1"}, ObjectMeta: storageMeta(c.GetMetadata()),
		Provisioner: c.GetProvisioner(), Parameters: c.GetParameters(),
	}
	if m := c.GetVolumeBindingMode(); m != "" {
		mode := storagev1.VolumeBindingMode(m)
		out.VolumeBindingMode = &mode
	}
	for _, t := range c.GetAllowedTopologies() {
		term := v1.TopologySelectorTerm{}
		for _, r := range t.GetMatchExpressions() {
			term.MatchLabelExpressions = append(term.MatchLabelExpressions,
				v1.TopologySelectorLabelRequirement{Key: r.GetKey(), Values: r.GetValues()})
		}
		out.AllowedTopologies = append(out.AllowedTopologies, term)
	}
	return out
}

// CSINode is a mirrored CSINode as a storage.k8s.io/v1 object.
func CSINode(n *pb.CSINode) *storagev1.CSINode {
	out := &storagev1.CSINode{
		TypeMeta: metav1.TypeMeta{Kind: "CSINode", APIVersion: "storage.k8s.io/v1"}, ObjectMeta: storageMeta(n.GetMetadata()),
	}
	for _, d := range n.GetDrivers() {
		driver := storagev1.CSINodeDriver{Name: d.GetName(), NodeID: d.GetNodeId(), TopologyKeys: d.GetTopologyKeys()}
		if d.Allocatable != nil {
			count := d.GetAllocatable()
			driver.Allocatable = &storagev1.VolumeNodeResources{Count: &count}
		}
		out.Spec.Drivers = append(out.Spec.Drivers, driver)
	}
	return out
}

// ---- feeding the Handle's listers from the mirror ----------------------------------------------------

// storageIndexers are the indexers behind the (never started) informer factory's PVC, PV, StorageClass
// and CSINode listers: what upstream's volume plugins read through Handle.SharedInformerFactory().
type storageIndexers struct {
	claims, volumes, classes, csinodes cache.Indexer
}

func newStorageIndexers(f informers.SharedInformerFactory) *storageIndexers {
	return &storageIndexers{
		claims:   f.Core().V1().PersistentVolumeClaims().Informer().GetIndexer(),
		volumes:  f.Core().V1().PersistentVolumes().Informer().GetIndexer(),
		classes:  f.Storage().V1().StorageClasses().Informer().GetIndexer(),
		csinodes: f.Storage().V1().CSINodes().Informer().GetIndexer(),
	}
}

// apply applies a mirror delta's storage changes (the contract's order: a resync empties them first,
// removals, then upserts). It runs inside the mirror's Apply, so once the host has applied a cycle's
// generation the listers hold that generation's objects.
func (s *storageIndexers) apply(d *pb.SnapshotDelta) {
	if d.GetFullResync() {
		for _, ix := range []cache.Indexer{s.claims, s.volumes, s.classes, s.csinodes} {
			_ = ix.Replace(nil, "")
		}
	}
	for _, ref := range d.GetStorageRemoved() {
		key := ref.GetName()
		ix := map[string]cache.Indexer{"PersistentVolume": s.volumes, "StorageClass": s.classes, "CSINode": s.csinodes}[ref.GetKind()]
		if ref.GetKind() == "PersistentVolumeClaim" {
			ix, key = s.claims, ref.GetNamespace()+"/"+ref.GetName()
		}
		if ix == nil {
			continue
		}
		if obj, ok, _ := ix.GetByKey(key); ok {
			_ = ix.Delete(obj)
		}
	}
	for _, obj := range d.GetStorageUpserts() {
		switch o := obj.GetObject().(type) {
		case *pb.StorageObject_PersistentVolumeClaim:
			_ = s.claims.Update(PersistentVolumeClaim(o.PersistentVolumeClaim))
		case *pb.StorageObject_PersistentVolume:
			_ = s.volumes.Update(PersistentVolume(o.PersistentVolume))
		case *pb.StorageObject_StorageClass:
			_ = s.classes.Update(StorageClass(o.StorageClass))
		case *pb.StorageObject_CsiNode:
			_ = s.csinodes.Update(CSINode(o.CsiNode))
		}
	}
}
