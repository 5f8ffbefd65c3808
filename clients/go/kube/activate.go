package kube

import (
	"encoding/json"
	"sort"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"outrigger.dev/clients/go/outrigger"
)

// PodsToActivateKey is the CycleState key on which the adapter hands the framework the pods the
// plugins put in kube-scheduler's PodsToActivate (Coscheduling's Permit puts a gang's siblings there):
// a JSON list of "namespace/name", sorted. The framework moves them to activeQ at the end of the
// scheduling cycle, as kube-scheduler's scheduleOne does with framework.PodsToActivateKey.
const PodsToActivateKey = "kubernetes.io/pods-to-activate"

// newCycleState is a cycle's CycleState as kube-scheduler's scheduleOne starts it: with an empty
// PodsToActivate for the plugins to fill.
func newCycleState() *framework.CycleState {
	state := framework.NewCycleState()
	state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
	return state
}

// publishActivations puts on the call's reply the pods in the cycle's PodsToActivate when a plugin
// added some since the last reply (every one of them, so a reply never drops what an earlier one
// said); cyc.mu is held.
func publishActivations(c *outrigger.Call, cyc *cycle) {
	data, err := cyc.state.Read(framework.PodsToActivateKey)
	if err != nil {
		return
	}
	pods, ok := data.(*framework.PodsToActivate)
	if !ok {
		return
	}
	pods.Lock()
	added := false
	for key := range pods.Map {
		if !cyc.activated[key] {
			cyc.activated[key] = true
			added = true
		}
	}
	pods.Unlock()
	if !added {
		return
	}
	keys := make([]string, 0, len(cyc.activated))
	for key := range cyc.activated {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	b, err := json.Marshal(keys)
	if err != nil {
		klog.ErrorS(err, "encoding the pods to activate")
		return
	}
	c.State.Set(PodsToActivateKey, outrigger.JSONContentType, b)
}
