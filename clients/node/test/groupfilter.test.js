'use strict';
// PodGroupPostFilter (lib/groupfilter.js) through a real host on 127.0.0.1, the stream driven as the
// framework drives it: the start, an answer to each ask to schedule the group without some pods, then
// the host's result (status, nominations, victims, state writes) and its span in the group's trace.
// Bad streams and bad answers are errors naming what is wrong.
const test = require('node:test');
const assert = require('node:assert/strict');
const grpc = require('@grpc/grpc-js');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { api } = require('../lib/tracing');
const { PluginHost, Status, manifestOf } = require('../lib/host');

const exporter = new InMemorySpanExporter();
api.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));

/** Takes out v1; if the group still does not fit, v1 and v2. Group names pick the bad answers. */
class Evict {
  static pluginName = 'Evict';
  static stateKeys = ['Evict/asked'];

  async podGroupPostFilter(state, group, schedule) {
    if (group.name === 'refused') {
      return { status: Status.unschedulable('nothing to evict'), nominations: [{ pod: group.pods[0], nodeName: 'n1' }] };
    }
    if (group.name === 'throws') throw new Error('boom');
    if (group.name === 'greedy') {
      for (let i = 0; i < 3; i++) await schedule(['v1']);
    }
    const asked = [];
    let got = await schedule(['v1']);
    asked.push(`${got.status.code}:${got.placement}`);
    if (got.status.code !== 'CODE_SUCCESS') {
      got = await schedule(['v1', 'v2']);
      asked.push(`${got.status.code}:${got.placement}`);
    }
    state.setJson('Evict/asked', asked);
    const nominations = got.proposed.filter((a) => a.nodeName).map((a) => ({ pod: a.pod, nodeName: a.nodeName }));
    if (group.name === 'stranger') nominations.push({ pod: 'ml/stranger', nodeName: 'n1' });
    return {
      status: Status.success(),
      nominations,
      victims: [
        { pod: { uid: 'v1', namespace: 'ml', name: 'low-1' }, nodeName: 'n1' },
        { pod: { ref: { uid: 'v2', namespace: 'ml', name: 'low-2' }, node_name: 'n2' } }, // as call.nodeInfos() lists it
      ].slice(0, asked.length),
    };
  }
}

const pods = [{ metadata: { name: 'p0', namespace: 'ml', uid: 'u0' } }, { metadata: { name: 'p1', namespace: 'ml', uid: 'u1' } }];
const TRACE = '0af7651916cd43dd8448eb211c80319c';
const PARENT = 'b7ad6b7169203331';

function start(name, maxSchedules = 4, plugin = 'Evict') {
  return { start: { max_schedules: maxSchedules, ctx: {
    group_cycle_id: 'gc1', plugin, profile: 'p', namespace: 'ml', name, min_count: 2, pods, snapshot_generation: 7,
    trace_context: { traceparent: `00-${TRACE}-${PARENT}-01` } } } };
}

/**
 * Drives one stream: writes `first`, answers each ask with the next of `answers` (ending the stream
 * when none is left), and resolves to {asks, result} or rejects with the stream's error.
 */
function drive(client, first, answers) {
  return new Promise((resolve, reject) => {
    const stream = client.PodGroupPostFilter({ deadline: new Date(Date.now() + 10000) });
    const asks = [];
    let result = null;
    stream.on('data', (msg) => {
      if (msg.msg === 'result') {
        result = msg.result;
        return;
      }
      asks.push(msg.schedule.removed_pods.map((p) => p.uid));
      const next = answers.shift();
      if (next === undefined) stream.end();
      else stream.write({ scheduled: next });
    });
    stream.on('error', reject);
    stream.on('end', () => resolve({ asks, result }));
    stream.write(first);
  });
}

const unschedulable = { status: { code: 'CODE_UNSCHEDULABLE', reasons: ['0/2 nodes are available'] }, placement: '', assignments: [] };
const placed = { status: { code: 'CODE_SUCCESS', reasons: [] }, placement: 'rack-a',
  assignments: [{ pod: 0, node_name: 'n1' }, { pod: 1, node_name: 'n2' }, { pod: 9, node_name: 'n9' }] };
const error = (reason) => ({ code: 'CODE_ERROR', reasons: [reason], plugin: '' });
const nothing = { nominations: [], victims: [], state_writes: [] };
/** The state write of a plugin that asked once and was answered `placed` (it rides on an Error too). */
const askedOnce = [{ key: 'Evict/asked', content_type: 'application/json', deleted: false, value: Buffer.from('["CODE_SUCCESS:rack-a"]') }];

async function withHost(fn) {
  const host = new PluginHost([Evict], { listen: '127.0.0.1:0', log: () => {} });
  await host.start();
  const client = new host.proto.Plugin(host.address, grpc.credentials.createInsecure());
  try {
    assert.equal((await new Promise((resolve, reject) => client.Configure({ plugin: 'Evict', profile: 'p' },
      (err, reply) => (err ? reject(err) : resolve(reply))))).status.code, 'CODE_SUCCESS');
    await fn(client);
  } finally {
    client.close();
    await host.stop(1000);
  }
}

test('a plugin with podGroupPostFilter declares the point', () => {
  assert.deepEqual(manifestOf(Evict).points, ['EXTENSION_POINT_POD_GROUP_POST_FILTER']);
});

test('the asks are answered, and the result carries nominations, victims and state writes, in the group\'s trace', async () => {
  exporter.reset();
  await withHost(async (client) => {
    const { asks, result } = await drive(client, start('train'), [unschedulable, placed]);
    assert.deepEqual(asks, [['v1'], ['v1', 'v2']]);
    assert.deepEqual(result, {
      status: { code: 'CODE_SUCCESS', reasons: [], plugin: '' },
      nominations: [{ pod: 0, node_name: 'n1', node_id: 0 }, { pod: 1, node_name: 'n2', node_id: 0 }],
      victims: [{ pod: { uid: 'v1', namespace: 'ml', name: 'low-1' }, node_name: 'n1' },
        { pod: { uid: 'v2', namespace: 'ml', name: 'low-2' }, node_name: 'n2' }],
      state_writes: [{ key: 'Evict/asked', content_type: 'application/json', deleted: false,
        value: Buffer.from('["CODE_UNSCHEDULABLE:","CODE_SUCCESS:rack-a"]') }],
    });
    const once = await drive(client, start('train'), [placed]);
    assert.deepEqual(once.asks, [['v1']]);
    assert.deepEqual(once.result.victims.map((v) => v.pod.uid), ['v1']);
  });
  const spans = exporter.getFinishedSpans();
  assert.equal(spans.length, 2);
  const [span] = spans;
  assert.equal(span.name, 'outrigger.v1.Plugin/PodGroupPostFilter');
  assert.equal(span.kind, api.SpanKind.SERVER);
  assert.equal(span.spanContext().traceId, TRACE);
  assert.equal(span.parentSpanContext.spanId, PARENT);
  assert.deepEqual(span.attributes, {
    'rpc.system': 'grpc', 'rpc.service': 'outrigger.v1.Plugin', 'rpc.method': 'PodGroupPostFilter',
    'outrigger.plugin': 'Evict', 'outrigger.profile': 'p', 'outrigger.cycle_id': 'gc1', 'outrigger.attempt': 0,
    'outrigger.snapshot.generation': 7, 'outrigger.pod_group': 'ml/train', 'outrigger.code': 'CODE_SUCCESS',
  });
});

const BAD = [
  ['more asks than max_schedules', start('greedy', 2), [placed, placed],
    error('the group may be scheduled again at most 2 times in one PodGroupPostFilter'), [['v1'], ['v1']]],
  ['a nominated pod not of the group', start('stranger'), [placed],
    error('nominated pod ml/stranger is not an unscheduled pod of pod group ml/stranger'), [['v1']], askedOnce],
  ['the plugin throwing', start('throws'), [], error('boom'), []],
  ['the framework ending the stream before answering', start('train'), [],
    error('the framework ended the PodGroupPostFilter stream before answering'), [['v1']]],
];

for (const [what, first, answers, status, wantAsks, writes = []] of BAD) {
  test(`${what} is an Error status naming it, with nothing nominated or evicted`, async () => {
    await withHost(async (client) => {
      const { asks, result } = await drive(client, first, answers);
      assert.deepEqual(asks, wantAsks);
      assert.deepEqual(result, { ...nothing, status, state_writes: writes });
    });
  });
}

test('a rejection drops its nominations', async () => {
  await withHost(async (client) => {
    const { asks, result } = await drive(client, start('refused'), []);
    assert.deepEqual(asks, []);
    assert.deepEqual(result, { status: { code: 'CODE_UNSCHEDULABLE', reasons: ['nothing to evict'], plugin: '' }, ...nothing });
  });
});

const REFUSED = [
  ['a stream not starting with its start', { scheduled: placed }, grpc.status.INVALID_ARGUMENT,
    'a PodGroupPostFilter stream must start with PodGroupPostFilterStart'],
  ['a plugin the host does not have', start('train', 4, 'Nobody'), grpc.status.NOT_FOUND,
    "this plugin host has no plugin named 'Nobody' (it hosts Evict)"],
];

for (const [what, first, code, details] of REFUSED) {
  test(`${what} is refused`, async () => {
    await withHost(async (client) => {
      await assert.rejects(drive(client, first, []), (err) => err.code === code && err.details === details);
    });
  });
}
