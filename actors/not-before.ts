/**
 * When a task or step may first be placed: its `notBefore`, or its `delayMs` counted from the
 * server time of its own creation event (`TaskCreated`, `StepCreated`), so that the fold, not
 * a clock, resolves it and a replay resolves it the same. Null when neither is set.
 */
export function resolveNotBefore(
  data: { notBefore?: string | undefined; delayMs?: number | undefined },
  createdAt: string,
): string | null {
  if (data.notBefore !== undefined) return new Date(Date.parse(data.notBefore)).toISOString();
  if (data.delayMs !== undefined)
    return new Date(Date.parse(createdAt) + data.delayMs).toISOString();
  return null;
}
