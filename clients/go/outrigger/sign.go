package outrigger

import (
	"context"
	"encoding/json"
	"fmt"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// SignFragment is one part of a pod's signature (kube-scheduler 1.37's fwk.SignFragment): Key names
// the pod field it reads ("v1.Pod.Spec.Tolerations"; with a "()" suffix naming the processing,
// "v1.Pod.Spec.ContainerRequestsAndOverheads()"), Value is anything encoding/json can marshal. Plugins
// reading the same thing the same way use the same key.
type SignFragment struct {
	Key   string
	Value any
}

// SignPlugin is implemented by a PreFilter, Filter, PreScore or Score plugin that lets its profile
// batch pods (opportunistic batching): SignPod returns what the plugin's answers for the pod depend
// on, so that two pods with equal fragments get the same answers on the same nodes; or an
// Unschedulable status when this pod cannot be signed (it is then scheduled on its own). A profile
// batches only when every such plugin of it signs. The framework asks once per pod and version;
// Call.State is nil (SignPod is not cycle-scoped).
type SignPlugin interface {
	Plugin
	SignPod(c *Call, pod *pb.Pod) ([]SignFragment, *Status)
}

// signPoints is EXTENSION_POINT_SIGN for a SignPlugin (the manifest then needs a point it signs for).
func signPoints(p Plugin) []pb.ExtensionPoint {
	if _, ok := p.(SignPlugin); !ok {
		return nil
	}
	return []pb.ExtensionPoint{pb.ExtensionPoint_EXTENSION_POINT_SIGN}
}

// signsFor says whether points include one that batching skips for a hinted pod.
func signsFor(points []pb.ExtensionPoint) bool {
	for _, pt := range points {
		switch pt {
		case pb.ExtensionPoint_EXTENSION_POINT_PRE_FILTER, pb.ExtensionPoint_EXTENSION_POINT_FILTER,
			pb.ExtensionPoint_EXTENSION_POINT_PRE_SCORE, pb.ExtensionPoint_EXTENSION_POINT_SCORE:
			return true
		}
	}
	return false
}

// SignPod runs the plugin's SignPod; the fragments' values go back as JSON (encoding/json sorts map
// keys, so equal values are equal bytes).
func (h *Host) SignPod(ctx context.Context, req *pb.PodRequest) (*pb.SignReply, error) {
	inst, call, span, err := h.podCall(ctx, "SignPod", req.GetPlugin(), req.GetProfile(), req.GetPod())
	if err != nil {
		return nil, err
	}
	var fragments []*pb.SignFragment
	st := guard("SignPod of plugin "+req.GetPlugin(), func() *Status {
		p, ok := inst.(SignPlugin)
		if !ok {
			return missing("SignPod")
		}
		got, st := p.SignPod(call, req.GetPod())
		if !st.IsSuccess() {
			return st
		}
		fragments, st = signFragments(got)
		return st
	})
	endSpan(span, st)
	if !st.IsSuccess() {
		fragments = nil
	}
	return &pb.SignReply{Status: st.ToProto(), Fragments: fragments}, nil
}

func signFragments(got []SignFragment) ([]*pb.SignFragment, *Status) {
	out := make([]*pb.SignFragment, 0, len(got))
	for i, f := range got {
		if f.Key == "" {
			return nil, NewStatus(Error, fmt.Sprintf("sign fragment %d has no key", i))
		}
		value, err := json.Marshal(f.Value)
		if err != nil {
			return nil, NewStatus(Error, fmt.Sprintf("sign fragment %q: %v", f.Key, err))
		}
		out = append(out, &pb.SignFragment{Key: f.Key, ValueJson: value})
	}
	return out, nil
}
