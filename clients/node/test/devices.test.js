'use strict';
// The device mirror of the Node.js host (lib/devices.js): deltas applied in the contract's order, a
// resync replacing everything, replays skipped; the lister's per-node views (current pool
// generation, node name / selector / per-device selection, devices in use and free, assumed
// allocations counted); a pod's claims; and the needsDevices declaration.
const test = require('node:test');
const assert = require('node:assert/strict');
const { DeviceMirror, attributeValue, nodeSelectorMatches } = require('../lib/devices');
const { manifestOf } = require('../lib/host');

const DRIVER = 'gpu.example.com';
const gpu = (name, numa) => ({ name, attributes: { numaNode: { int: numa, value: 'int' } }, node_selector: null });
const slice = (name, pool, generation, spec) => ({
  object: 'resource_slice',
  resource_slice: { metadata: { name }, driver: DRIVER, pool, pool_generation: generation, pool_slice_count: 1, node_selector: null, ...spec },
});
const cls = (name) => ({ object: 'device_class', device_class: { metadata: { name }, selectors: [`device.driver == "${DRIVER}"`] } });
const claim = (name, devices, assumed = false) => ({
  object: 'resource_claim',
  resource_claim: {
    metadata: { name, namespace: 'ns' },
    requests: [{ name: 'gpu', exactly: { device_class_name: 'gpu', count: 1 } }],
    allocation: devices.length ? { results: devices.map(([pool, device]) => ({ request: 'gpu', driver: DRIVER, pool, device })) } : null,
    allocation_assumed: assumed,
  },
});
const node = (name, labels = {}) => ({ metadata: { name, labels } });
const names = (devices) => devices.map((d) => d.id);

test('deltas add, replace and remove device objects; a resync replaces them all; replays are skipped', () => {
  const m = new DeviceMirror();
  m.apply({ generation: 3, full_resync: true, device_upserts: [cls('gpu'), slice('n1-gpus', 'n1', 1, { node_name: 'n1', devices: [gpu('gpu0', 0)] })] });
  const l = m.lister();
  assert.deepEqual([l.deviceClass('gpu').selectors, l.slice('n1-gpus').devices.length], [[`device.driver == "${DRIVER}"`], 1]);
  m.apply({ generation: 4, device_upserts: [slice('n1-gpus', 'n1', 1, { node_name: 'n1', devices: [gpu('gpu0', 0), gpu('gpu1', 1)] }), claim('c', [])] });
  assert.deepEqual([l.slice('n1-gpus').devices.map((d) => attributeValue(d.attributes.numaNode)), l.claim('ns', 'c').allocation], [[0, 1], null]);
  m.apply({ generation: 4, device_removed: [{ kind: 'DeviceClass', name: 'gpu' }] }); // a replay: skipped
  assert.notEqual(l.deviceClass('gpu'), undefined);
  m.apply({ generation: 5, device_removed: [{ kind: 'DeviceClass', name: 'gpu' }, { kind: 'ResourceClaim', namespace: 'ns', name: 'c' }] });
  assert.deepEqual([l.deviceClass('gpu'), l.claim('ns', 'c'), l.list('ResourceSlice').map((s) => s.metadata.name)], [undefined, undefined, ['n1-gpus']]);
  m.apply({ generation: 9, full_resync: true, device_upserts: [cls('other')] });
  const again = m.lister();
  assert.deepEqual([again.list('DeviceClass').map((c) => c.metadata.name), again.list('ResourceSlice'), m.generation, m.resyncs], [['other'], [], 9, 2]);
  assert.throws(() => again.list('Pod'), /not a device kind: Pod/);
});

test('per-node views: current generation only, node forms, in use and free with assumed allocations', () => {
  const m = new DeviceMirror();
  m.apply({
    generation: 1, full_resync: true, device_upserts: [
      slice('n1-old', 'n1', 1, { node_name: 'n1', devices: [gpu('stale', 0)] }),
      slice('n1-new', 'n1', 2, { node_name: 'n1', devices: [gpu('gpu0', 0), gpu('gpu1', 0)] }),
      slice('rack', 'rack', 1, { node_selector: { terms: [{ match_expressions: [{ key: 'rack', operator: 'In', values: ['r1'] }], match_fields: [] }] }, devices: [gpu('r0', 1)] }),
      slice('per-device', 'pd', 1, { per_device_node_selection: true, devices: [{ ...gpu('d0', 2), node_name: 'n2' }, { ...gpu('d1', 2), all_nodes: true }] }),
      slice('everywhere', 'all', 1, { all_nodes: true, devices: [{ ...gpu('shared', 3), allow_multiple_allocations: true }] }),
      claim('held', [['n1', 'gpu0'], ['all', 'shared']]),
      claim('reserving', [['n1', 'gpu1']], true),
    ],
  });
  const l = m.lister();
  const n1 = node('n1', { rack: 'r1' });
  assert.deepEqual(names(l.nodeDevices(n1)), [`${DRIVER}/all/shared`, `${DRIVER}/n1/gpu0`, `${DRIVER}/n1/gpu1`, `${DRIVER}/pd/d1`, `${DRIVER}/rack/r0`]);
  assert.deepEqual(names(l.nodeDevices(node('n2'))), [`${DRIVER}/all/shared`, `${DRIVER}/pd/d0`, `${DRIVER}/pd/d1`]);
  assert.deepEqual(names(l.inUseOnNode(n1)), [`${DRIVER}/all/shared`, `${DRIVER}/n1/gpu0`, `${DRIVER}/n1/gpu1`]);
  assert.deepEqual(names(l.freeOnNode(n1)), [`${DRIVER}/all/shared`, `${DRIVER}/pd/d1`, `${DRIVER}/rack/r0`]);
  assert.deepEqual([...l.allocated().keys()].sort(), [`${DRIVER}/all/shared`, `${DRIVER}/n1/gpu0`, `${DRIVER}/n1/gpu1`]);
  assert.equal(l.claim('ns', 'reserving').allocation_assumed, true);
});

test('node selectors: terms ORed, requirements ANDed, an empty term matches nothing', () => {
  const sel = (...terms) => ({ terms });
  const n = node('n1', { zone: 'a', gen: '5' });
  assert.deepEqual([
    nodeSelectorMatches(sel({ match_expressions: [{ key: 'zone', operator: 'In', values: ['a'] }, { key: 'gen', operator: 'Gt', values: ['4'] }] }), n),
    nodeSelectorMatches(sel({ match_expressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }, { match_fields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }] }), n),
    nodeSelectorMatches(sel({ match_expressions: [{ key: 'gpu', operator: 'Exists', values: [] }] }), n),
    nodeSelectorMatches(sel({ match_expressions: [], match_fields: [] }), n),
  ], [true, true, false, false]);
});

test("a pod's claims: named directly or made from a template", () => {
  const m = new DeviceMirror();
  m.apply({ generation: 1, full_resync: true, device_upserts: [claim('direct', []), claim('p-gpu-x7', [])] });
  const pod = {
    metadata: { name: 'p', namespace: 'ns' },
    spec: { resource_claims: [{ name: 'a', resource_claim_name: 'direct' }, { name: 'b', resource_claim_template_name: 't' }, { name: 'c', resource_claim_template_name: 't' }] },
    status: { resource_claim_statuses: { b: 'p-gpu-x7' } },
  };
  assert.deepEqual(m.lister().podClaims(pod).map(({ entry, claim: c }) => [entry, c && c.metadata.name]), [['a', 'direct'], ['b', 'p-gpu-x7'], ['c', undefined]]);
});

test('needsDevices goes to the manifest, and must be a boolean', () => {
  class Reads { static pluginName = 'Reads'; static needsDevices = true; score() { return []; } }
  class Bad { static pluginName = 'Bad'; static needsDevices = 1; score() { return []; } }
  class Plain { static pluginName = 'Plain'; score() { return []; } }
  assert.deepEqual([manifestOf(Reads).needs_devices, manifestOf(Plain).needs_devices], [true, false]);
  assert.throws(() => manifestOf(Bad), /plugin Bad: needsDevices must be true or false/);
});
