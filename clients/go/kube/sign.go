//go:build !k8s1.34

package kube

import (
	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/kube/internal/fwk"
	"outrigger.dev/clients/go/outrigger"
)

// signPoints is EXTENSION_POINT_SIGN for a kube-scheduler SignPlugin with a point it signs for: its
// SignPod then lets the framework batch the pods of profiles whose plugins all sign.
func signPoints(p fwk.Plugin) []pb.ExtensionPoint {
	if _, ok := p.(fwk.SignPlugin); !ok || !fwk.SignsFor(p) {
		return nil
	}
	return []pb.ExtensionPoint{pb.ExtensionPoint_EXTENSION_POINT_SIGN}
}

// SignPod runs the plugin's SignPod on the pod; its fragments' values are marshalled by the SDK
// (encoding/json, as kube-scheduler marshals the signature it builds of them). A plugin that cannot
// sign the pod answers its Unschedulable status.
func (p *Plugin) SignPod(c *outrigger.Call, pod *pb.Pod) ([]outrigger.SignFragment, *outrigger.Status) {
	sp, ok := p.p.(fwk.SignPlugin)
	if !ok {
		return nil, outrigger.NewStatus(outrigger.Error, "plugin "+p.served+" does not implement Sign")
	}
	fragments, st := sp.SignPod(c, Pod(pod))
	if !st.IsSuccess() {
		return nil, statusOf(st)
	}
	out := make([]outrigger.SignFragment, len(fragments))
	for i, f := range fragments {
		out[i] = outrigger.SignFragment{Key: f.Key, Value: f.Value}
	}
	return out, nil
}
