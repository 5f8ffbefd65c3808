'use strict';
// Sign (lib/sign.js) through a real host on 127.0.0.1: signPod declares EXTENSION_POINT_SIGN (only with a
// point it signs for), fragments travel as canonical JSON, and null, a non-success Status or a bad
// fragment become the statuses the framework reads as "cannot sign".
const test = require('node:test');
const assert = require('node:assert/strict');
const grpc = require('@grpc/grpc-js');
const { PluginHost, Status, manifestOf, PluginDefinitionError } = require('../lib/host');
const { canonicalJson } = require('../lib/sign');
const { PoolFit } = require('../plugins/poolfit');

class Signs {
  static pluginName = 'Signs';

  filter(state, pod, nodes) {
    return nodes.map(() => null);
  }

  signPod(pod) {
    const name = pod.metadata.name;
    if (name === 'refused') return Status.unschedulable('has claims');
    if (name === 'bad') return [['', 1]];
    if (name === 'empty') return [];
    return [['v1.Pod.Spec.Tolerations', [{ b: 2, a: { d: 1, c: [1, 'x'] } }]], { key: 'v1.Pod.Spec.NodeName', value: '' }];
  }
}

function rpc(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: new Date(Date.now() + 10000) }, (err, reply) => (err ? reject(err) : resolve(reply)));
  });
}

test('canonical JSON sorts object keys at every level', () => {
  assert.equal(canonicalJson({ b: [{ z: 1, y: null }], a: 'x', u: undefined }), '{"a":"x","b":[{"y":null,"z":1}]}');
});

test('signPod declares Sign next to the points it signs for, and only with one', () => {
  assert.deepEqual(manifestOf(PoolFit).points, ['EXTENSION_POINT_FILTER', 'EXTENSION_POINT_SIGN']);
  class OnlySign {
    static pluginName = 'S';

    reserve() {}

    signPod() { return []; }
  }
  assert.throws(() => manifestOf(OnlySign), (err) => err instanceof PluginDefinitionError
    && err.message === 'plugin S: signPod needs preFilter, filter, preScore or score (the points it signs for)');
});

test('SignPod over gRPC', async () => {
  const host = new PluginHost([Signs], { listen: '127.0.0.1:0', log: () => {} });
  await host.start();
  const client = new host.proto.Plugin(host.address, grpc.credentials.createInsecure());
  try {
    await rpc(client, 'Configure', { plugin: 'Signs', profile: 'p' });
    const ask = (name) => rpc(client, 'SignPod', { plugin: 'Signs', profile: 'p', pod: { metadata: { name } } });
    const signed = await ask('p0');
    assert.equal(signed.status.code, 'CODE_SUCCESS');
    assert.deepEqual(signed.fragments.map((f) => [f.key, f.value_json.toString()]), [
      ['v1.Pod.Spec.Tolerations', '[{"a":{"c":[1,"x"],"d":1},"b":2}]'], ['v1.Pod.Spec.NodeName', '""']]);
    const empty = await ask('empty');
    assert.deepEqual([empty.status.code, empty.fragments], ['CODE_SUCCESS', []]);
    const refused = await ask('refused');
    assert.deepEqual([refused.status.code, refused.status.reasons, refused.fragments], ['CODE_UNSCHEDULABLE', ['has claims'], []]);
    const bad = await ask('bad');
    assert.deepEqual([bad.status.code, bad.status.reasons],
      ['CODE_ERROR', ['signPod fragment 0 has no key: return [key, value] pairs with a non-empty string key']]);
  } finally {
    client.close();
    await host.stop(1000);
  }
});
