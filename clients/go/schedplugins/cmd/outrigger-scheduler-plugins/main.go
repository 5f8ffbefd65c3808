// Command outrigger-scheduler-plugins serves two plugins of sigs.k8s.io/scheduler-plugins, unmodified,
// as an Outrigger plugin host: Coscheduling (gang scheduling: a PodGroup's pods wait in Permit until
// minMember of them have a node, or none binds) and NodeResourcesAllocatable (scores nodes by their
// allocatable resources). They are registered exactly as scheduler-plugins' own kube-scheduler build
// registers them (app.WithPlugin) and served out of process by package kube, built against the
// Kubernetes release scheduler-plugins v0.34.7 is (build with -tags k8s1.34; docs/plugin-go.md).
//
// Coscheduling reads PodGroups and pods from the apiserver when it is built, so the host needs
// --kubeconfig:
//
//	outrigger-scheduler-plugins --listen 127.0.0.1:0 --kubeconfig ~/.kube/config
package main

import (
	"os"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/noderesources"

	// Registers the plugins' args types (CoschedulingArgs, NodeResourcesAllocatableArgs) in
	// kube-scheduler's scheme, which decodes a profile's pluginConfig args.
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"

	"outrigger.dev/clients/go/kube"
)

func main() {
	os.Exit(kube.Main("outrigger scheduler-plugins host", os.Args[1:],
		app.WithPlugin(coscheduling.Name, coscheduling.New),
		app.WithPlugin(noderesources.AllocatableName, noderesources.NewAllocatable),
	))
}
