//go:build !k8s1.34

// Package fwk names the kube-scheduler framework types the adapter (package kube) uses, at their home
// in the Kubernetes release the build links. Kubernetes 1.35 moved the plugin interfaces and the Handle
// from k8s.io/kubernetes/pkg/scheduler/framework to k8s.io/kube-scheduler/framework: this file names
// them there, at the release clients/go pins (1.37); built with -tags k8s1.34 against a 1.34 release
// (sigs.k8s.io/scheduler-plugins v0.34), fwk_134.go names them where 1.34 kept them. What both
// releases keep in k8s.io/kube-scheduler/framework (CycleState, Status, NodeInfo...) is in shared.go.
// The names are aliases, so the adapter's signatures are exactly kube-scheduler's in either release;
// where a signature differs between the releases (PreBindPreFlight's result), a function here and in
// fwk_134.go gives the adapter one call for both. Only the adapter imports this package; plugins
// import kube-scheduler's own.
package fwk

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kube-scheduler/framework"
)

// The extension points' interfaces and what they take and return.
type (
	Plugin              = framework.Plugin
	PreEnqueuePlugin    = framework.PreEnqueuePlugin
	EnqueueExtensions   = framework.EnqueueExtensions
	PreFilterPlugin     = framework.PreFilterPlugin
	PreFilterResult     = framework.PreFilterResult
	PreFilterExtensions = framework.PreFilterExtensions
	FilterPlugin        = framework.FilterPlugin
	PostFilterPlugin    = framework.PostFilterPlugin
	PreScorePlugin      = framework.PreScorePlugin
	ScorePlugin         = framework.ScorePlugin
	NodeScore           = framework.NodeScore
	NodeScoreList       = framework.NodeScoreList
	NodePluginScores    = framework.NodePluginScores
	ReservePlugin       = framework.ReservePlugin
	PermitPlugin        = framework.PermitPlugin
	PreBindPlugin       = framework.PreBindPlugin
	BindPlugin          = framework.BindPlugin
	PostBindPlugin      = framework.PostBindPlugin
)

// The points of 1.37's pod group cycle the adapter serves (PlacementGenerate, PlacementScore) and
// what they take and return.
type (
	PlacementGeneratePlugin  = framework.PlacementGeneratePlugin
	PlacementScorePlugin     = framework.PlacementScorePlugin
	PlacementScoreExtensions = framework.PlacementScoreExtensions
	Placement                = framework.Placement
	PlacementScore           = framework.PlacementScore
	PodGroupAssignments      = framework.PodGroupAssignments
	PodGroupCycleState       = framework.PodGroupCycleState
	PlacementCycleState      = framework.PlacementCycleState
)

// PodGroupKeyType is the type of a PodGroupInfo that is a pod group (not a composite one).
const PodGroupKeyType = framework.PodGroupKeyType

// Opportunistic batching's Sign (served with the points it signs for), QueueSort, and 1.37's
// PodGroupPostFilter (served over the contract's stream): the adapter detects QueueSort and Sign
// without a point it signs for (Unserved), and serves a plugin's other points.
type (
	QueueSortPlugin          = framework.QueueSortPlugin
	SignPlugin               = framework.SignPlugin
	PodGroupPostFilterPlugin = framework.PodGroupPostFilterPlugin
)

// The Handle and what it hands out.
type (
	Handle            = framework.Handle
	SharedLister      = framework.SharedLister
	NodeInfoLister    = framework.NodeInfoLister
	StorageInfoLister = framework.StorageInfoLister
	SharedDRAManager  = framework.SharedDRAManager
	CSIManager        = framework.CSIManager
	CSINodeLister     = framework.CSINodeLister
	Parallelizer      = framework.Parallelizer
	APICacher         = framework.APICacher
	Extender          = framework.Extender
	NominatingInfo    = framework.NominatingInfo
	WaitingPod        = framework.WaitingPod
)

// What SharedDRAManager hands out.
type (
	ResourceClaimTracker = framework.ResourceClaimTracker
	ResourceSliceLister  = framework.ResourceSliceLister
	DeviceClassLister    = framework.DeviceClassLister
	DeviceClassResolver  = framework.DeviceClassResolver
)

// What 1.37's SharedLister adds: pod groups and composite pod groups (GenericWorkload).
type (
	PodGroupStateLister          = framework.PodGroupStateLister
	PodGroupState                = framework.PodGroupState
	PodGroupLister               = framework.PodGroupLister
	CompositePodGroupStateLister = framework.CompositePodGroupStateLister
	CompositePodGroupState       = framework.CompositePodGroupState
	CompositePodGroupLister      = framework.CompositePodGroupLister
)

// What PodGroupPostFilter's Handle hands out: the mutable snapshot, and pods in PreBind.
type (
	MutableSnapshotSharedLister = framework.MutableSnapshotSharedLister
	PodGroupPostFilterResult    = framework.PodGroupPostFilterResult
	PodInPreBind                = framework.PodInPreBind
	PodGroupManager             = framework.PodGroupManager
)

// Release is the kube-scheduler framework the build links, as the adapter names it in messages.
const Release = "1.37"

// PreBindPreFlight runs p's PreBindPreFlight. Its result (AllowParallel: may PreBind run beside
// other plugins' PreBind) is the framework's to decide and the contract does not carry it; only the
// status is returned.
func PreBindPreFlight(ctx context.Context, p PreBindPlugin, state CycleState, pod *v1.Pod, nodeName string) *Status {
	_, st := p.PreBindPreFlight(ctx, state, pod, nodeName)
	return st
}

// Unserved names the points p implements that the adapter does not serve: QueueSort (a comparator
// cannot be answered a key at a time), Sign when p has no PreFilter, Filter, PreScore nor Score to
// sign for.
func Unserved(p Plugin) []string {
	var out []string
	for _, point := range []struct {
		name string
		ok   bool
	}{
		{"QueueSort", implements[QueueSortPlugin](p)},
		{"Sign", implements[SignPlugin](p) && !SignsFor(p)},
	} {
		if point.ok {
			out = append(out, point.name)
		}
	}
	return out
}

// SignsFor says whether p has a point opportunistic batching skips for a hinted pod (PreFilter,
// Filter, PreScore, Score): only then does its Sign let a profile batch.
func SignsFor(p Plugin) bool {
	return implements[PreFilterPlugin](p) || implements[FilterPlugin](p) || implements[PreScorePlugin](p) ||
		implements[ScorePlugin](p)
}
