// @ts-check
/**
 * `sonar/component-boundaries`: a backend component (a folder of src/backend/) is entered
 * from outside only through its index.ts. Relative imports are resolved against the
 * importing file, so the rule holds whatever the depth of either side.
 */
import { dirname, relative, resolve, sep } from 'node:path';

const BACKEND = resolve(import.meta.dirname, '..', 'src', 'backend');

/** The component a path lies in (`api`, `reconciler`, ...), or null for backend root files. */
function componentOf(path) {
  const rel = relative(BACKEND, path);
  if (rel.startsWith('..') || !rel.includes(sep)) return null;
  return rel.split(sep)[0];
}

/** @type {import('eslint').Rule.RuleModule} */
export const componentBoundaries = {
  meta: {
    type: 'problem',
    docs: { description: "no import into another backend component's internals" },
    schema: [],
  },
  create(context) {
    const file = context.filename;
    const check = (node) => {
      const spec = node.source?.value;
      if (typeof spec !== 'string' || !spec.startsWith('.')) return;
      const target = resolve(dirname(file), spec);
      const component = componentOf(target);
      if (component === null || componentOf(file) === component) return;
      const entrance = resolve(BACKEND, component, 'index.js');
      if (target === entrance) return;
      context.report({
        node: node.source,
        message: `import src/backend/${component}/ through its index.js, not ${spec}`,
      });
    };
    return {
      ImportDeclaration: check,
      ExportNamedDeclaration: check,
      ExportAllDeclaration: check,
      ImportExpression: check,
    };
  },
};
