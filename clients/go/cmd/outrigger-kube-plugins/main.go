// Command outrigger-kube-plugins serves kube-scheduler's own in-tree plugins, unmodified, from the Go
// module proxy at the pinned Kubernetes release, as an Outrigger plugin host: registered exactly as a
// custom kube-scheduler build registers plugins (app.WithPlugin), served out of process by package kube.
// With --prefix Upstream they sit beside Outrigger's own in-tree plugins of the same names, which is
// how tests/test_go_plugins.py compares the two.
//
//	outrigger-kube-plugins --listen 127.0.0.1:0 --prefix Upstream
package main

import (
	"os"

	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podgrouppodscount"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/topologyaware"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumerestrictions"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumezone"
	"k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"outrigger.dev/clients/go/kube"
)

func main() {
	// The feature gates kube-scheduler's own registry hands its in-tree plugins.
	fts := plfeature.NewSchedulerFeaturesFromGates(feature.DefaultFeatureGate)
	// DefaultPreemption serves its PodGroupPostFilter: the framework's GenericWorkload gate decides
	// whether group cycles (and so that point) run, and the framework evicts the victims, so the
	// plugin reports them within the call (synchronous preemption; the deletions go nowhere).
	groups := fts
	groups.EnableGenericWorkload = true
	groups.EnableAsyncPreemption = false
	os.Exit(kube.Main("outrigger kube-scheduler plugin host", os.Args[1:],
		app.WithPlugin(noderesources.Name, runtime.FactoryAdapter(fts, noderesources.NewFit)),
		app.WithPlugin(noderesources.BalancedAllocationName, runtime.FactoryAdapter(fts, noderesources.NewBalancedAllocation)),
		app.WithPlugin(tainttoleration.Name, runtime.FactoryAdapter(fts, tainttoleration.New)),
		app.WithPlugin(nodeaffinity.Name, runtime.FactoryAdapter(fts, nodeaffinity.New)),
		app.WithPlugin(interpodaffinity.Name, runtime.FactoryAdapter(fts, interpodaffinity.New)),
		app.WithPlugin(podtopologyspread.Name, runtime.FactoryAdapter(fts, podtopologyspread.New)),
		// The volume plugins read storage objects: the adapter feeds their listers from the mirror.
		app.WithPlugin(volumezone.Name, runtime.FactoryAdapter(fts, volumezone.New)),
		app.WithPlugin(volumerestrictions.Name, runtime.FactoryAdapter(fts, volumerestrictions.New)),
		app.WithPlugin(nodevolumelimits.CSIName, runtime.FactoryAdapter(fts, nodevolumelimits.NewCSI)),
		// The pod group cycle's (1.37, GenericWorkload): PlacementScore and PlacementGenerate.
		app.WithPlugin(podgrouppodscount.Name, runtime.FactoryAdapter(fts, podgrouppodscount.New)),
		app.WithPlugin(topologyaware.Name, runtime.FactoryAdapter(fts, topologyaware.New)),
		app.WithPlugin(defaultpreemption.Name, runtime.FactoryAdapter(groups, defaultpreemption.New)),
	))
}
