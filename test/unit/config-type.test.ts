// The type of loadConfig()'s result, written out: every field, whether it is optional, and its
// type. The type is what the SDK's users compile against, so a change to the settings table
// that changes it must show here. Checked by the typecheck (tsc), not at run time.
import { describe, expectTypeOf, it } from 'vitest';
import type { TagRates } from '../../actors/reconciler/tag-rates.js';
import type { S3Config, SonarConfig } from '../../src/config.js';
import type { LogLevel } from '../../src/log.js';
import type { CommandPolicy } from '../../src/worker/command-policy.js';

interface ExpectedS3Config {
  endpoint: string;
  bucket: string;
  accessKey: string;
  secretKey: string;
}

interface ExpectedSonarConfig {
  natsUrl: string;
  natsCreds?: string;
  natsUser?: string;
  natsPassword?: string;
  natsTlsCa?: string;
  natsTlsCert?: string;
  natsTlsKey?: string;
  natsInboxPrefix?: string;
  workerSigningKey?: string;
  workerAccountJwt?: string;
  workerCredentialTtlMs: number;
  natsOperatorSigningKey?: string;
  natsSysCreds?: string;
  prefix: string;
  tickMs: number;
  publishTimeoutMs: number;
  orphanAgeMs: number;
  pulseIntervalMs: number;
  pulseTtlMs: number;
  recoveryLimit: number;
  recoveryWindowMs: number;
  capacityMultiplier: number;
  dispatchBatch: number;
  priorityAgingMs: number;
  tagRates?: TagRates;
  finalizers: number;
  finalizeBatch: number;
  finalizeLeaseMs: number;
  finalizeMaxDeliver: number;
  drainGraceMs: number;
  spotMarginMs: number;
  workerCommands: CommandPolicy;
  maxOutputBytes: number;
  maxInputBytes: number;
  maxOpenTasks: number;
  lockTtlMs: number;
  replicas: number;
  strictDurability?: boolean;
  eventsMaxBytes: number | 'auto';
  stagingMaxBytes: number;
  logsMaxBytes: number;
  httpPort?: number;
  httpHost?: string;
  httpToken?: string;
  dashboard: boolean;
  sessionTtlMs: number;
  httpSecureCookie: 'auto' | boolean;
  httpTrustedProxies: number;
  retentionMs: number;
  fullSweepMs: number;
  stopGraceMs: number;
  logLevel?: LogLevel;
  imdsUrl: string;
  s3?: ExpectedS3Config;
  resultsUrl?: string;
  allowSnapshotLoss?: boolean;
}

describe('SonarConfig', () => {
  it('has every field, with its optionality and its type', () => {
    expectTypeOf<SonarConfig>().toEqualTypeOf<ExpectedSonarConfig>();
    expectTypeOf<S3Config>().toEqualTypeOf<ExpectedS3Config>();
  });
});
