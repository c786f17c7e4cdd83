// The quota.threshold percents per consumer (src/events/consumer-thresholds.ts) and which endpoints take which percent
// (src/events/dispatcher.ts endpointTakes): a consumer's own endpoints add their percents to events.thresholds for
// that consumer alone, and only the endpoint that asked for a percent receives it.
import { describe, expect, it } from 'vitest';
import { ConsumerThresholds } from '../src/events/consumer-thresholds.js';
import { endpointTakes, type DeliveryEndpoint, type StreamEntry } from '../src/events/dispatcher.js';

function source(list: Array<{ consumer: string; thresholds?: number[] }>, fail = { now: false }) {
  return {
    all: async () => {
      if (fail.now) throw new Error('Redis is down');
      return list;
    },
  };
}

describe('ConsumerThresholds', () => {
  it('a consumer with endpoints asking for percents gets events.thresholds and theirs; everyone else events.thresholds', async () => {
    const t = new ConsumerThresholds(
      [80, 100],
      source([{ consumer: 'acme', thresholds: [50, 80] }, { consumer: 'acme', thresholds: [90] }, { consumer: 'globex' }]),
    );
    expect(t.of('acme')).toEqual([80, 100]);
    await t.refresh();
    expect(t.of('acme')).toEqual([50, 80, 90, 100]);
    expect(t.of('globex')).toEqual([80, 100]);
    expect(t.of('initech')).toEqual([80, 100]);
    expect(t.of(undefined)).toEqual([80, 100]);
  });

  it('a failed read keeps the percents read before (a Redis blip does not silence a consumer’s alerts)', async () => {
    const list = [{ consumer: 'acme', thresholds: [50] }];
    const fail = { now: false };
    const t = new ConsumerThresholds([80], source(list, fail));
    await t.refresh();
    expect(t.of('acme')).toEqual([50, 80]);
    fail.now = true;
    await t.refresh();
    expect(t.of('acme')).toEqual([50, 80]);
    fail.now = false;
    list.length = 0;
    await t.refresh();
    expect(t.of('acme')).toEqual([80]);
  });
});

describe('endpointTakes and percents', () => {
  const entry = (percent: number, consumer = 'acme'): StreamEntry =>
    ({ streamId: '1-0', id: `e${percent}`, type: 'quota.threshold', consumer, key: 'key_1', plan: 'small', percent, ce: '{}' }) satisfies StreamEntry;
  const configured: DeliveryEndpoint = { id: 'ops', url: 'https://ops.example/', secrets: ['whsec_x'], thresholds: [80, 100] };
  const own: DeliveryEndpoint = { id: 'ep_1', url: 'https://acme.example/', secrets: ['whsec_y'], consumer: 'acme', thresholds: [50] };

  it('a configured webhook takes events.thresholds only, not a percent a consumer’s endpoint asked for', () => {
    expect(endpointTakes(configured, entry(80))).toBe(true);
    expect(endpointTakes(configured, entry(100))).toBe(true);
    expect(endpointTakes(configured, entry(50))).toBe(false);
  });

  it('a registered endpoint takes its own percents, of its own consumer only', () => {
    expect(endpointTakes(own, entry(50))).toBe(true);
    expect(endpointTakes(own, entry(80))).toBe(false);
    expect(endpointTakes(own, entry(50, 'globex'))).toBe(false);
  });
});
