'use strict';
// The PodGroup points (lib/placement.js) through a real host on 127.0.0.1: the manifest declares them,
// each call gets the group, placements by node name and the group cycle's CycleState, and bad answers
// or requests become Error statuses naming what is wrong.
const test = require('node:test');
const assert = require('node:assert/strict');
const grpc = require('@grpc/grpc-js');
const { PluginHost, Status, manifestOf, PluginDefinitionError } = require('../lib/host');

/** One placement per rack (the node name's prefix before '-'); scores by pods sharing the first pod's node. */
class Racks {
  static pluginName = 'Racks';
  static stateKeys = ['Racks/group'];

  generatePlacements(state, group, parent) {
    if (group.name === 'refused') return { status: Status.unschedulable('no rack is big enough'), placements: [] };
    if (group.name === 'outside') return [{ name: 'x', nodes: ['elsewhere'] }];
    const racks = new Map();
    for (const n of parent.nodes) {
      const rack = n.split('-')[0];
      if (!racks.has(rack)) racks.set(rack, []);
      racks.get(rack).push(n);
    }
    state.setJson('Racks/group', `${group.namespace}/${group.name}/${group.minCount}/${group.pods.length}/${group.topologyKeys.join(',')}`);
    return [...racks].map(([name, nodes]) => ({ name, nodes }));
  }

  scorePlacement(state, group, placement, proposed) {
    if (placement.name === 'half') return 0.5;
    return 10 * proposed.filter((a) => a.nodeName === proposed[0].nodeName).length;
  }

  normalizePlacementScore(state, group, placements, scores) {
    for (let i = 0; i < scores.length; i++) scores[i] = Math.floor(scores[i] / 2);
  }
}

const success = { code: 'CODE_SUCCESS', reasons: [], plugin: '' };

function rpc(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: new Date(Date.now() + 10000) }, (err, reply) => (err ? reject(err) : resolve(reply)));
  });
}

test('a plugin with the PodGroup methods declares their points; normalizing needs scoring', () => {
  assert.deepEqual(manifestOf(Racks).points, ['EXTENSION_POINT_PLACEMENT_GENERATE', 'EXTENSION_POINT_PLACEMENT_SCORE',
    'EXTENSION_POINT_NORMALIZE_PLACEMENT_SCORE']);
  class OnlyNormalize {
    static pluginName = 'N';

    normalizePlacementScore() {}
  }
  assert.throws(() => manifestOf(OnlyNormalize), (err) => err instanceof PluginDefinitionError
    && err.message === 'plugin N: normalizePlacementScore needs scorePlacement');
});

test('GeneratePlacements, ScorePlacement and NormalizePlacementScore over gRPC', async () => {
  const host = new PluginHost([Racks], { listen: '127.0.0.1:0', log: () => {} });
  await host.start();
  const client = new host.proto.Plugin(host.address, grpc.credentials.createInsecure());
  try {
    const configured = await rpc(client, 'Configure', { plugin: 'Racks', profile: 'p' });
    assert.equal(configured.status.code, 'CODE_SUCCESS');
    const pods = [{ metadata: { name: 'p0', namespace: 'ml' } }, { metadata: { name: 'p1', namespace: 'ml' } }];
    const ctx = (name) => ({ group_cycle_id: 'g1', plugin: 'Racks', profile: 'p', namespace: 'ml', name, min_count: 2, topology_keys: ['rack', 'zone'], pods });
    const parent = { name: '', node_names: ['a-1', 'b-1', 'a-2'] };

    const gen = await rpc(client, 'GeneratePlacements', { ctx: ctx('train'), parent });
    assert.deepEqual(gen.status, success);
    assert.deepEqual(gen.placements.map((p) => [p.name, ...p.node_names]), [['a', 'a-1', 'a-2'], ['b', 'b-1']]);
    assert.deepEqual(gen.state_writes.map((w) => [w.key, w.value.toString()]), [['Racks/group', '"ml/train/2/2/rack,zone"']]);

    const refused = await rpc(client, 'GeneratePlacements', { ctx: ctx('refused'), parent });
    assert.deepEqual([refused.status.code, refused.status.reasons, refused.placements],
      ['CODE_UNSCHEDULABLE', ['no rack is big enough'], []]);
    const outside = await rpc(client, 'GeneratePlacements', { ctx: ctx('outside'), parent });
    assert.deepEqual([outside.status.code, outside.status.reasons],
      ['CODE_ERROR', ["generatePlacements: placement 'x' names nodes outside its parent: elsewhere"]]);
    const byId = await rpc(client, 'GeneratePlacements', { ctx: ctx('train'), parent: { node_ids: [1, 2] } });
    assert.deepEqual(byId.status.reasons,
      ["placement '' carries node ids only (this host does not follow the snapshot mirror: it needs names)"]);

    const placement = { name: 'a', node_names: ['a-1', 'a-2'] };
    const scored = await rpc(client, 'ScorePlacement', { ctx: ctx('train'), placement, placement_cycle_id: 'g1/placement/a',
      assignments: [{ pod: 0, node_name: 'a-1' }, { pod: 1, node_name: 'a-1' }] });
    assert.deepEqual([scored.status, scored.score], [success, 20]);
    const badPod = await rpc(client, 'ScorePlacement', { ctx: ctx('train'), placement,
      assignments: [{ pod: 5, node_name: 'a-1' }] });
    assert.deepEqual([badPod.status.code, badPod.status.reasons], ['CODE_ERROR', ['assignment names pod 5 of 2']]);
    const half = await rpc(client, 'ScorePlacement', { ctx: ctx('train'), placement: { name: 'half', node_names: ['a-1'] } });
    assert.deepEqual(half.status.reasons, ['scorePlacement returned a score that is not an integer: 0.5']);

    const norm = await rpc(client, 'NormalizePlacementScore', { ctx: ctx('train'), placements: ['a', 'b'], scores: [20, 11] });
    assert.deepEqual([norm.status, norm.scores], [success, [10, 5]]);
    const uneven = await rpc(client, 'NormalizePlacementScore', { ctx: ctx('train'), placements: ['a'], scores: [20, 11] });
    assert.deepEqual(uneven.status.reasons, ['1 placements for 2 scores']);
  } finally {
    client.close();
    await host.stop(1000);
  }
});
