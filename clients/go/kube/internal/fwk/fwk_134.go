//go:build k8s1.34

package fwk

import (
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
