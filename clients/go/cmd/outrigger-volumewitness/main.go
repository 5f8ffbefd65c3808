// Command outrigger-volumewitness serves VolumeWitness, tests/volume_plugin_witness.py's plugin written
// with the Go SDK: it reads a pod's volumes and, from the host's snapshot mirror (NeedsVolumes), the
// claims, volumes and classes behind them, and keeps only the nodes in the zone of each claim's volume.
// Its rejections say what it saw, word for word as the Python one's, so tests/test_remote_volumes.py
// gives both the same steps and expects the same verdicts.
//
//	outrigger-volumewitness --listen 127.0.0.1:0
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/outrigger"
)

// Zone is the node and volume label compared.
const Zone = "topology.kubernetes.io/zone"

const betaClass = "volume.beta.kubernetes.io/storage-class"

// VolumeWitness is the plugin.
type VolumeWitness struct{}

// Name is the plugin's name.
func (VolumeWitness) Name() string { return "VolumeWitness" }

// claimOf is the claim a volume uses ("" for none): its claimName, or <pod>-<volume> for an ephemeral one.
func claimOf(pod *pb.Pod, v *pb.PodVolume) string {
	switch v.GetSource() {
	case "persistentVolumeClaim":
		return v.GetClaimName()
	case "ephemeral":
		return pod.GetMetadata().GetName() + "-" + v.GetName()
	}
	return ""
}

func classOf(c *pb.PersistentVolumeClaim) string {
	if beta, ok := c.GetMetadata().GetAnnotations()[betaClass]; ok {
		return beta
	}
	return c.GetStorageClassName()
}

func all(n int, st *outrigger.Status) []*outrigger.Status {
	out := make([]*outrigger.Status, n)
	for i := range out {
		out[i] = st
	}
	return out
}

type want struct{ zone, what string }

// Filter keeps the nodes in the zone of every claim's volume; a claim missing, unbound or whose
// volume is missing rejects every node, saying so.
func (VolumeWitness) Filter(c *outrigger.Call, pod *pb.Pod, nodes []outrigger.Node) []*outrigger.Status {
	vols := pod.GetSpec().GetVolumes()
	if len(vols) == 0 {
		return make([]*outrigger.Status, len(nodes))
	}
	store := c.Snapshot.Volumes()
	seen := make([]string, len(vols))
	for i, v := range vols {
		seen[i] = fmt.Sprintf("'%s:%s'", v.GetName(), v.GetSource())
	}
	prefix := "volumes [" + strings.Join(seen, ", ") + "]: "
	var wants []want
	for _, v := range vols {
		name := claimOf(pod, v)
		if name == "" {
			continue
		}
		claim := store.Claim(pod.GetMetadata().GetNamespace(), name)
		switch {
		case claim == nil:
			return all(len(nodes), outrigger.NewStatus(outrigger.UnschedulableAndUnresolvable, prefix+"claim "+name+" not found"))
		case claim.GetVolumeName() == "":
			return all(len(nodes), outrigger.NewStatus(outrigger.Unschedulable, prefix+"claim "+name+" not bound"))
		}
		pv := store.Volume(claim.GetVolumeName())
		if pv == nil {
			return all(len(nodes), outrigger.NewStatus(outrigger.UnschedulableAndUnresolvable,
				prefix+"volume "+claim.GetVolumeName()+" not found"))
		}
		provisioner := "none"
		if sc := store.StorageClass(classOf(claim)); sc != nil {
			provisioner = sc.GetProvisioner()
		}
		zone, ok := pv.GetMetadata().GetLabels()[Zone]
		shown := zone
		if !ok {
			shown = "-"
		}
		wants = append(wants, want{zone, fmt.Sprintf("%s in %s class %s", pv.GetMetadata().GetName(), shown, provisioner)})
	}
	out := make([]*outrigger.Status, len(nodes))
	for i, n := range nodes {
		zone := n.State.Node.GetMetadata().GetLabels()[Zone]
		for _, w := range wants {
			if w.zone != "" && w.zone != zone {
				out[i] = outrigger.NewStatus(outrigger.UnschedulableAndUnresolvable, "volume "+w.what)
				break
			}
		}
	}
	return out
}

func main() {
	fs := flag.NewFlagSet("outrigger-volumewitness", flag.ContinueOnError)
	os.Exit(outrigger.Main("outrigger go plugin host", fs, os.Args[1:], func() ([]outrigger.Registration, error) {
		return []outrigger.Registration{{
			Name: "VolumeWitness", Factory: func(json.RawMessage, *outrigger.Env) (outrigger.Plugin, error) { return VolumeWitness{}, nil },
			NeedsVolumes: true,
		}}, nil
	}))
}
