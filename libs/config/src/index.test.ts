import { describe, expect, it } from '@jest/globals';
import { loadConfig } from './index.js';

describe('loadConfig', () => {
  it('applies the CONTRACT.md defaults', () => {
    const cfg = loadConfig({});
    expect(cfg.HOST).toBe('127.0.0.1');
    expect(cfg.SERVICE_DATA_DIR).toBe('.data');
    expect(cfg.SERVICE_AUTH).toBe('on');
    expect(cfg.DATABASE_URL).toBeUndefined();
    expect(cfg.LOG_LEVEL).toBe('info');
    expect(cfg.SERVICE_HEAP_GROWTH_PERCENT).toBe(50);
    expect(cfg.SERVICE_QUIET_GC_SECONDS).toBe(30);
    expect(cfg.SERVICE_BUS_REPLICAS).toBe(1);
    expect(loadConfig({ SERVICE_BUS_REPLICAS: '3' }).SERVICE_BUS_REPLICAS).toBe(3);
  });

  it('names the variable of a bad value', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(/PORT/);
    expect(() => loadConfig({ SERVICE_AUTH: 'maybe' })).toThrow(/SERVICE_AUTH/);
    expect(() => loadConfig({ DATABASE_URL: 'not a url' })).toThrow(/DATABASE_URL/);
    expect(() => loadConfig({ NATS_URL: 'localhost:4222' })).toThrow(/NATS_URL/);
    expect(() => loadConfig({ SERVICE_HEAP_GROWTH_PERCENT: '-5' })).toThrow(/SERVICE_HEAP_GROWTH_PERCENT/);
    expect(() => loadConfig({ SERVICE_QUIET_GC_SECONDS: '1.5' })).toThrow(/SERVICE_QUIET_GC_SECONDS/);
    for (const n of ['0', '6', 'three']) expect(() => loadConfig({ SERVICE_BUS_REPLICAS: n })).toThrow(/SERVICE_BUS_REPLICAS/);
  });

  it('treats blank values as unset', () => {
    expect(loadConfig({ DATABASE_URL: '  ', SERVICE_DEV_SECRET_KEY: '' }).DATABASE_URL).toBeUndefined();
  });
});
