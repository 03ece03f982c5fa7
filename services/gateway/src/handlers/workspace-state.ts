import { randomUUID } from 'node:crypto';
import type { Database } from '@dws/db';
import { create, toBinary, WorkspaceUpsertedSchema } from '@dws/proto';
import { seal, unseal } from '@dws/protocol';
import { subjects, type Outbox, type PendingPublish } from '@dws/runtime';
import { mergeProviders, type Providers, type ProvidersPatch } from '../domain/providers.js';
import { ceiling, mergeLimits, operatorChange, settleSuspension, type LimitsPatch, type Suspension, type Usage } from '../domain/usage.js';
import { lockUsage } from '../store/usage.js';
import { saveWorkspaceState, type WorkspaceRow } from '../store/workspaces.js';

/**
 * Write the WorkspaceUpserted fact into the outbox inside `tx`: the invoker
 * learns the signing key, suspension and model providers from it, ingest the
 * suspension, the scheduler the monthly model ceilings, every service that
 * keeps history the retention window (null: the default, announced as 0). Every change is a new fact (its own msgId); the consumers
 * upsert, so order within the stream wins. The fact is always whole: a
 * missing field would wipe the consumer's copy.
 */
export async function announceWorkspace(
  tx: Database,
  outbox: Outbox,
  w: {
    id: string;
    name: string;
    signingKey: string;
    suspended: boolean;
    providers: Providers;
    retentionDays: number | null;
    limits: Record<string, unknown>;
  },
) {
  const fact = create(WorkspaceUpsertedSchema, {
    workspaceId: w.id,
    name: w.name,
    signingKey: w.signingKey,
    suspended: w.suspended,
    providers: enc.encode(JSON.stringify(w.providers)),
    retentionDays: w.retentionDays ?? 0,
    modelTokensPerMonth: ceiling(w.limits, 'modelTokensPerMonth') ?? 0,
    modelCostPerMonth: ceiling(w.limits, 'modelCostPerMonth') ?? 0,
  });
  return outbox.enqueue(tx, [{ subject: subjects.workspaceUpserted, msgId: `ws-${w.id}-${randomUUID()}`, payload: toBinary(WorkspaceUpsertedSchema, fact) }]);
}

const enc = new TextEncoder();

/** A stored workspace's providers, unsealed. */
export function providersOf(row: Pick<WorkspaceRow, 'providers_sealed'>, sealKey: Buffer): Providers {
  return row.providers_sealed ? (JSON.parse(unseal(row.providers_sealed, sealKey)) as Providers) : {};
}

/** A stored workspace, whole, as the fact announces it. */
export function announceRow(tx: Database, outbox: Outbox, sealKey: Buffer, row: WorkspaceRow) {
  return announceWorkspace(tx, outbox, {
    id: row.id,
    name: row.name,
    signingKey: unseal(row.signing_key_sealed, sealKey),
    suspended: row.suspended,
    providers: providersOf(row, sealKey),
    retentionDays: row.retention_days,
    limits: row.limits ?? {},
  });
}

export interface Settled {
  row: WorkspaceRow;
  usage: Usage;
  /** The WorkspaceUpserted to publish after commit, when one was written. */
  pending: PendingPublish | undefined;
}

/** What an admin PATCH may change; `retentionDays` null goes back to the default window. */
export interface WorkspaceChange {
  suspended?: boolean;
  limits?: LimitsPatch;
  providers?: ProvidersPatch;
  retentionDays?: number | null;
}

/**
 * The one path that changes a workspace's suspension or limits: an admin
 * PATCH (`change` set), the usage meter and the rollover sweep (`change`
 * empty). Inside `tx`, with `row` locked by `lockWorkspace`: apply the
 * operator's change, lock the month's usage, settle the suspension against
 * the ceilings (domain/usage.ts), write what changed and announce it the way
 * the admin PATCH always has. A PATCH is always announced; otherwise only a
 * change of `suspended` is.
 *
 * `known` skips the usage read when the caller has just written (and so
 * locked) the current month's usage itself.
 */
export async function settleWorkspace(
  tx: Database,
  d: { outbox: Outbox; sealKey: Buffer },
  row: WorkspaceRow,
  month: string,
  change: WorkspaceChange = {},
  known?: Usage,
): Promise<Settled> {
  const current: Suspension = { suspended: row.suspended, reason: row.suspended ? (row.suspended_reason ?? 'operator') : null };
  const limits = change.limits ? mergeLimits(row.limits ?? {}, change.limits) : (row.limits ?? {});
  const usage = known ?? (await lockUsage(tx, row.id, month));
  const next = settleSuspension(operatorChange(current, change.suspended), limits, usage);
  const patched = change.suspended !== undefined || change.limits !== undefined || change.providers !== undefined || change.retentionDays !== undefined;
  const moved = next.suspended !== row.suspended || next.reason !== row.suspended_reason;
  if (!patched && !moved) return { row, usage, pending: undefined };

  let providersSealed = row.providers_sealed;
  if (change.providers) {
    const providers = mergeProviders(providersOf(row, d.sealKey), change.providers);
    providersSealed = Object.keys(providers).length ? seal(JSON.stringify(providers), d.sealKey) : null;
  }
  const retentionDays = change.retentionDays !== undefined ? change.retentionDays : row.retention_days;
  const saved = await saveWorkspaceState(tx, row.id, { suspended: next.suspended, reason: next.reason, limits, providersSealed, retentionDays });
  const pending = patched || next.suspended !== row.suspended ? await announceRow(tx, d.outbox, d.sealKey, saved) : undefined;
  return { row: saved, usage, pending };
}
