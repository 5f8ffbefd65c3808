// Command gatedump prints, as JSON, every feature gate kube-scheduler registers at the Kubernetes release
// of the module it is built in (tests/k8s/kubernetes/<release>): its default, stability, whether it is
// locked, and the gates it depends on. python -m tools.featuregates builds it there and writes
// framework/featuregates_data.py from its output.
package main

import (
	"encoding/json"
	"os"
	"sort"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics/features"
	_ "k8s.io/kubernetes/pkg/features" // registers the Kubernetes gates, as kube-scheduler's import does
)

type gate struct {
	Name       string   `json:"name"`
	Default    bool     `json:"default"`
	Locked     bool     `json:"locked"`
	PreRelease string   `json:"prerelease"`
	Deps       []string `json:"deps"`
}

func main() {
	// The two registrations kube-scheduler's own init adds (cmd/kube-scheduler/app/server.go).
	must(logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
	must(features.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
	fg := utilfeature.DefaultMutableFeatureGate
	deps := fg.Dependencies()
	out := []gate{}
	for name, spec := range fg.GetAll() {
		g := gate{Name: string(name), Default: spec.Default, Locked: spec.LockToDefault,
			PreRelease: string(spec.PreRelease), Deps: []string{}}
		for _, d := range deps[name] {
			g.Deps = append(g.Deps, string(d))
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	must(enc.Encode(out))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
