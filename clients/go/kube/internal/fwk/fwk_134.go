//go:build k8s1.34

package fwk

import (
	"context"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
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

// The Handle and what it hands out.
type (
	Handle            = framework.Handle
	SharedLister      = framework.SharedLister
	NodeInfoLister    = framework.NodeInfoLister
	StorageInfoLister = framework.StorageInfoLister
	SharedDRAManager  = framework.SharedDRAManager
	Parallelizer      = parallelize.Parallelizer
	APICacher         = framework.APICacher
	Extender          = framework.Extender
	NominatingInfo    = framework.NominatingInfo
	WaitingPod        = framework.WaitingPod
)

// CSIManager stands in for 1.35's: a 1.34 Handle has no SharedCSIManager, so nothing asks the
// adapter's Handle for one.
type CSIManager interface{}

// CSINodeLister stands in for 1.35's (what the adapter's CSIManager lists).
type CSINodeLister interface {
	List() ([]*storagev1.CSINode, error)
	Get(name string) (*storagev1.CSINode, error)
}

// QueueSortPlugin is 1.34's (Unserved names it).
type QueueSortPlugin = framework.QueueSortPlugin

// Release is the kube-scheduler framework the build links, as the adapter names it in messages.
const Release = "1.34"

// PreBindPreFlight runs p's PreBindPreFlight (1.34's returns a status only).
func PreBindPreFlight(ctx context.Context, p PreBindPlugin, state CycleState, pod *v1.Pod, nodeName string) *Status {
	return p.PreBindPreFlight(ctx, state, pod, nodeName)
}

// Unserved names the points p implements that the adapter does not serve: in 1.34, QueueSort only
// (a comparator cannot be answered a key at a time).
func Unserved(p Plugin) []string {
	if implements[QueueSortPlugin](p) {
		return []string{"QueueSort"}
	}
	return nil
}
