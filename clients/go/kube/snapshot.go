package kube

import (
	"fmt"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"outrigger.dev/clients/go/kube/internal/fwk"
	"outrigger.dev/clients/go/outrigger"
)

type nodeInfoKey struct{}

// NodeInfo is kube-scheduler's NodeInfo of a mirrored node: the node and its pods as v1 objects,
// built once per NodeState (a NodeState never changes, so the NodeInfo is cached on it). A node view's
// requested delta (a transformer's NodeChange.requested) is added to Requested.
func NodeInfo(ns *outrigger.NodeState) *framework.NodeInfo {
	return ns.Memo(nodeInfoKey{}, func() any {
		pods := make([]*v1.Pod, len(ns.Pods))
		for i, p := range ns.Pods {
			pods[i] = PodOfPlacement(p)
		}
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(Node(ns.Node))
		for name, v := range ns.RequestedDelta {
			switch v1.ResourceName(name) {
			case v1.ResourceCPU:
				ni.Requested.MilliCPU += v
			case v1.ResourceMemory:
				ni.Requested.Memory += v
			case v1.ResourceEphemeralStorage:
				ni.Requested.EphemeralStorage += v
			case v1.ResourcePods:
			default:
				if ni.Requested.ScalarResources == nil {
					ni.Requested.ScalarResources = map[v1.ResourceName]int64{}
				}
				ni.Requested.ScalarResources[v1.ResourceName(name)] += v
			}
		}
		return ni
	}).(*framework.NodeInfo)
}

type listsKey struct{}

// lists are a snapshot's NodeInfos in node id order, and the subsets kube-scheduler's snapshot keeps.
type lists struct {
	all, withAffinity, withRequiredAntiAffinity, withRequiredNonHostScopedAntiAffinity []fwk.NodeInfo
}

func listsOf(s *outrigger.Snapshot) *lists {
	return s.Memo(listsKey{}, func() any {
		nodes := s.Nodes()
		out := &lists{all: make([]fwk.NodeInfo, len(nodes))}
		for i, n := range nodes {
			ni := NodeInfo(n)
			out.all[i] = ni
			if len(ni.PodsWithAffinity) > 0 {
				out.withAffinity = append(out.withAffinity, ni)
			}
			if len(ni.PodsWithRequiredAntiAffinity) > 0 {
				out.withRequiredAntiAffinity = append(out.withRequiredAntiAffinity, ni)
			}
			if nonHostScoped(ni) {
				out.withRequiredNonHostScopedAntiAffinity = append(out.withRequiredNonHostScopedAntiAffinity, ni)
			}
		}
		return out
	}).(*lists)
}

// Lister is kube-scheduler's SharedLister over a mirrored snapshot: NodeInfos of the snapshot the
// current scheduling-cycle call runs against (the framework runs one scheduling cycle at a time, as
// kube-scheduler does; plugins keep the lister they got from the Handle at construction).
type Lister struct {
	current atomic.Pointer[outrigger.Snapshot]
	// group is the group of the pod group cycle the current call runs in (the 1.37 build's *groupView;
	// 1.34 has no pod groups).
	group atomic.Value
	// podGroup, when set, holds a func(namespace, name string) any: the API server's PodGroup of that
	// namespace and name (nil when it has none), a *scheduling/v1beta1.PodGroup read from the Handle's
	// informer on a live apiserver.
	podGroup atomic.Value
}

// Set makes s the snapshot the lister reads.
func (l *Lister) Set(s *outrigger.Snapshot) { l.current.Store(s) }

func (l *Lister) snapshot() *outrigger.Snapshot {
	if s := l.current.Load(); s != nil {
		return s
	}
	return outrigger.EmptySnapshot()
}

// NodeInfos lists the snapshot's nodes.
func (l *Lister) NodeInfos() fwk.NodeInfoLister { return nodeInfoLister{l} }

// StorageInfos answers that no PVC is used (the contract does not carry volumes).
func (l *Lister) StorageInfos() fwk.StorageInfoLister { return storageInfos{} }

type nodeInfoLister struct{ l *Lister }

func (n nodeInfoLister) List() ([]fwk.NodeInfo, error) { return listsOf(n.l.snapshot()).all, nil }

func (n nodeInfoLister) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return listsOf(n.l.snapshot()).withAffinity, nil
}

func (n nodeInfoLister) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return listsOf(n.l.snapshot()).withRequiredAntiAffinity, nil
}

func (n nodeInfoLister) Get(name string) (fwk.NodeInfo, error) {
	s := n.l.snapshot()
	ns := s.NodeByName(name)
	if ns == nil {
		return nil, fmt.Errorf("nodeinfo not found for node name %q", name)
	}
	return NodeInfo(ns), nil
}

type storageInfos struct{}

func (storageInfos) IsPVCUsedByPods(string) bool { return false }
