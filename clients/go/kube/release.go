package kube

import (
	"runtime/debug"

	"outrigger.dev/clients/go/kube/internal/fwk"
	"outrigger.dev/clients/go/outrigger"
)

// KubernetesModule is the module whose release the adapter's host advertises.
const KubernetesModule = "k8s.io/kubernetes"

// Release is the Kubernetes release the host was built against: the version of k8s.io/kubernetes the
// binary links (after the module's replace directives), e.g. "v1.37.2"; without build information,
// the framework release the adapter was compiled for (e.g. "1.37"; go test binaries carry no
// dependencies in theirs).
func Release() string { return releaseOf(debug.ReadBuildInfo()) }

func releaseOf(info *debug.BuildInfo, ok bool) string {
	if ok {
		for _, dep := range info.Deps {
			if dep.Path != KubernetesModule {
				continue
			}
			if dep.Replace != nil && dep.Replace.Version != "" {
				return dep.Replace.Version
			}
			return dep.Version
		}
	}
	return fwk.Release
}

// Version is the host's version as its Handshake sends it and --version prints it: the SDK's and the
// Kubernetes release, e.g. "0.1.0-go kubernetes/v1.37.2".
func Version() string { return outrigger.HostVersion + " kubernetes/" + Release() }
