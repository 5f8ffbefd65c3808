'use strict';
// Configure through a real host on 127.0.0.1: the framework configures a host again after any failed call
// (a slow one too), so the same args keep the instance and its state; other args build it again and stop
// the one replaced; after a Stop, Configure builds it again.
const test = require('node:test');
const assert = require('node:assert/strict');
const grpc = require('@grpc/grpc-js');
const { PluginHost } = require('../lib/host');

function rpc(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: new Date(Date.now() + 10000) }, (err, reply) => (err ? reject(err) : resolve(reply)));
  });
}

const cases = [
  { name: 'same args', second: '{"n": 1, "calls": "x"}', stopBetween: false, built: 1, stops: [] },
  { name: 'same args spelled otherwise', second: ' {"calls":"x","n":1} ', stopBetween: false, built: 1, stops: [] },
  { name: 'new args', second: '{"n": 2, "calls": "x"}', stopBetween: false, built: 2, stops: [1] },
  { name: 'stopped in between', second: '{"n": 1, "calls": "x"}', stopBetween: true, built: 2, stops: [1] },
];

for (const tc of cases) {
  test(`Configure again: ${tc.name}`, async () => {
    const made = [];
    const stops = [];
    class Tally {
      static pluginName = 'Tally';

      constructor() { made.push(this); this.id = made.length; }

      filter(state, pod, nodes) { return nodes.map(() => null); }

      stop() { stops.push(this.id); }
    }
    const host = new PluginHost([Tally], { listen: '127.0.0.1:0', log: () => {} });
    await host.start();
    const client = new host.proto.Plugin(host.address, grpc.credentials.createInsecure());
    try {
      for (const [i, args] of ['{"n": 1, "calls": "x"}', tc.second].entries()) {
        if (i === 1 && tc.stopBetween) await rpc(client, 'Stop', { profile: 'p', reason: 'lost the lease' });
        const reply = await rpc(client, 'Configure', { plugin: 'Tally', profile: 'p', args_json: args });
        assert.equal(reply.status.code, 'CODE_SUCCESS');
      }
      await new Promise((resolve) => { setImmediate(resolve); }); // a replaced instance's stop runs after the reply
      assert.equal(made.length, tc.built);
      assert.deepEqual(stops, tc.stops);
    } finally {
      client.close();
      await host.stop(100);
    }
  });
}
