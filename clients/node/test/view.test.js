'use strict';
// applyView: the nodes a plugin reads, as a CycleContext.node_view says the cycle sees them.
const test = require('node:test');
const assert = require('node:assert/strict');
const { applyView } = require('../lib/host');

function info(name, id, labels, pods = []) {
  return {
    node: { metadata: { name, labels }, status: { allocatable: { cpu: 4000, pods: 110 } } },
    node_id: id,
    requested: { cpu: pods.reduce((n, p) => n + p.requests.cpu, 0), pods: pods.length },
    non_zero_requested: {},
    pods,
    generation: 5,
  };
}

const placed = (uid, cpu) => ({ ref: { uid, namespace: 'default', name: uid }, requests: { cpu } });

test('a node view removes pods, adds nodes and pods, then applies changes in order', () => {
  const base = new Map([
    ['a', info('a', 1, { tier: 'gold' }, [placed('victim', 500), placed('stays', 250)])],
    ['b', info('b', 2, { tier: 'silver' })],
  ]);
  const view = {
    removed_pods: [{ uid: 'victim', node_name: 'a' }, { uid: 'unknown', node_name: 'b' }],
    added_nodes: [{ id: 100, node: { metadata: { name: 'what-if', labels: { tier: 'gold' } } } }],
    added_pods: [{ metadata: { uid: 'nominated', namespace: 'default', name: 'nominated', labels: {} },
      spec: { node_name: 'b' }, requests: { cpu: 1000 } }],
    changes: [
      { node_name: 'a', allocatable: { cpu: -1000 }, requested: {}, labels: { zone: 'z1' }, remove_labels: ['tier'] },
      { node_name: 'a', allocatable: {}, requested: { cpu: 100 }, labels: { zone: 'z2' }, remove_labels: [] },
      { node_name: 'missing', allocatable: {}, requested: {}, labels: { x: 'y' }, remove_labels: [] },
    ],
  };
  const got = applyView(base, view, 5);
  assert.deepEqual([...got.keys()], ['a', 'b', 'what-if']);
  assert.deepEqual(got.get('a').node.metadata.labels, { zone: 'z2' });
  assert.deepEqual(got.get('a').node.status.allocatable, { cpu: 3000, pods: 110 });
  assert.deepEqual(got.get('a').requested, { cpu: 350, pods: 1 });
  assert.deepEqual(got.get('a').pods.map((p) => p.ref.uid), ['stays']);
  assert.deepEqual(got.get('b').requested, { cpu: 1000, pods: 1 });
  assert.deepEqual(got.get('b').pods.map((p) => p.ref.uid), ['nominated']);
  assert.deepEqual(got.get('what-if').node.metadata.labels, { tier: 'gold' });
  assert.equal(got.get('what-if').node_id, 100);
  // The snapshot's objects are untouched (shared by every call of the generation).
  assert.deepEqual(base.get('a').node.metadata.labels, { tier: 'gold' });
  assert.deepEqual(base.get('a').requested, { cpu: 750, pods: 2 });
  assert.equal(base.get('b').pods.length, 0);
});

test('no node view: the snapshot as it is', () => {
  const base = new Map([['a', info('a', 1, {})]]);
  assert.equal(applyView(base, null, 5), base);
});
