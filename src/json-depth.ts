/**
 * How deeply a JSON value nests, found without recursion. `JSON.stringify` recurses, so a task
 * input nested a few thousand levels deep overflows the stack wherever it is serialized (the
 * size check, the event envelope, the dispatch message, the projection snapshot); this walk
 * uses an explicit stack and stops as soon as the bound is passed, so its cost is bounded by
 * the value's size and never by its depth.
 *
 * @module
 */

/**
 * Whether `value` nests arrays and objects more than `max` levels deep. A scalar is depth 0,
 * `[]` and `{}` depth 1, `{"a":[1]}` depth 2.
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const stack: { v: object; depth: number }[] = [{ v: value, depth: 1 }];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    if (top.depth > max) return true;
    const children: unknown[] = Array.isArray(top.v)
      ? top.v
      : Object.values(top.v as Record<string, unknown>);
    for (const child of children) {
      if (typeof child === 'object' && child !== null) {
        stack.push({ v: child, depth: top.depth + 1 });
      }
    }
  }
  return false;
}
