//go:build !k8s1.34

// Package fwk names the kube-scheduler framework types the adapter (package kube) uses, at their home
// in the Kubernetes release the build links. Kubernetes 1.35 moved the plugin interfaces and the Handle
// from k8s.io/kubernetes/pkg/scheduler/framework to k8s.io/kube-scheduler/framework: this file names
// them there; built with -tags k8s1.34 against a 1.34 release (sigs.k8s.io/scheduler-plugins v0.34),
// fwk_134.go names them where 1.34 kept them. What both releases keep in k8s.io/kube-scheduler/
// framework (CycleState, Status, NodeInfo...) is in shared.go. The names are aliases, so the adapter's
// signatures are exactly kube-scheduler's in either release. Only the adapter imports this package;
// plugins import kube-scheduler's own.
package fwk

import "k8s.io/kube-scheduler/framework"

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
	CSIManager        = framework.CSIManager
	CSINodeLister     = framework.CSINodeLister
	Parallelizer      = framework.Parallelizer
	APICacher         = framework.APICacher
	Extender          = framework.Extender
	NominatingInfo    = framework.NominatingInfo
	WaitingPod        = framework.WaitingPod
)
