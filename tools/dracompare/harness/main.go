// Command harness runs kube-scheduler 1.37's structured-parameters allocator
// (k8s.io/dynamic-resource-allocation/structured v0.37.2, the features on by
// default in 1.37) on a JSON list of cases read from stdin and prints, per case,
// the devices allocated ({"results": [[[request, driver, pool, device], ...], ...]},
// null when the node cannot serve the claims) or {"error": text}.
// tools/dracompare runs it next to Outrigger's port (framework/dra).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type input struct {
	Node      v1.Node                      `json:"node"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
	Allocated [][3]string                  `json:"allocated"`
	Shared    map[string]map[string]string `json:"shared"`
}

type lister []*resourceapi.DeviceClass

func (l lister) List() ([]*resourceapi.DeviceClass, error) { return l, nil }
func (l lister) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("deviceclass.resource.k8s.io %q not found", name)
}

func main() {
	var cases []input
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	features := structured.Features{AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true,
		DeviceBindingAndStatus: true, ConsumableCapacity: true, FractionalCapacityRange: true}
	var out []map[string]any
	for _, in := range cases {
		state := structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
		for _, d := range in.Allocated {
			state.AllocatedDevices.Insert(structured.MakeDeviceID(d[0], d[1], d[2]))
		}
		for key, caps := range in.Shared {
			var drv, pool, dev string
			fmt.Sscanf(key, "%s %s %s", &drv, &pool, &dev)
			m := map[resourceapi.QualifiedName]resource.Quantity{}
			for n, v := range caps {
				m[resourceapi.QualifiedName(n)] = resource.MustParse(v)
			}
			state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(structured.MakeDeviceID(drv, pool, dev), m))
		}
		// The API server's defaults: ExactCount, count 1.
		for _, c := range in.Claims {
			for i := range c.Spec.Devices.Requests {
				r := &c.Spec.Devices.Requests[i]
				if r.Exactly != nil && r.Exactly.AllocationMode == "" {
					r.Exactly.AllocationMode = resourceapi.DeviceAllocationModeExactCount
				}
				if r.Exactly != nil && r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeExactCount && r.Exactly.Count == 0 {
					r.Exactly.Count = 1
				}
				for j := range r.FirstAvailable {
					s := &r.FirstAvailable[j]
					if s.AllocationMode == "" {
						s.AllocationMode = resourceapi.DeviceAllocationModeExactCount
					}
					if s.AllocationMode == resourceapi.DeviceAllocationModeExactCount && s.Count == 0 {
						s.Count = 1
					}
				}
			}
		}
		ctx := context.Background()
		cache := cel.NewCache(10, cel.Features{EnableConsumableCapacity: true})
		a, err := structured.NewAllocator(ctx, features, state, lister(in.Classes), in.Slices, cache)
		if err != nil {
			panic(err)
		}
		res, err := a.Allocate(ctx, &in.Node, in.Claims)
		entry := map[string]any{}
		if err != nil {
			entry["error"] = err.Error()
		} else if res == nil {
			entry["results"] = nil
		} else {
			var all [][][4]string
			for _, r := range res {
				var one [][4]string
				for _, d := range r.Devices.Results {
					one = append(one, [4]string{d.Request, d.Driver, d.Pool, d.Device})
				}
				all = append(all, one)
			}
			entry["results"] = all
		}
		out = append(out, entry)
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
