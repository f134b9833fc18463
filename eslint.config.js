import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Refuses an upper bound on elapsed wall-clock time in an assertion (docs/testing.md, "Waiting on
 * events, not on the clock"): `expect(<time>).toBeLessThan*()` or `.not.toBeGreaterThan*()`, where
 * <time> reads Date.now(), performance.now(), process.hrtime() or `new Date()`, directly or through
 * the variables it is computed from (an array pushed into too), or is a parameter named as a
 * duration (ms, elapsed, took...), whose value cannot be followed. A lower bound stays allowed (a
 * slow machine cannot break it), and so does anything read from a manual clock.
 */
const noWallClockUpperBound = {
  meta: {
    type: 'problem',
    docs: { description: 'no upper bound on elapsed wall-clock time in a test (speed is measured by npm run bench)' },
    messages: {
      bound:
        'An upper bound on elapsed wall-clock time fails on a loaded machine: wait on an event or a count, or use a manual clock ' +
        '(docs/testing.md, "Waiting on events, not on the clock"); speed is measured in bench/.',
    },
    schema: [],
  },
  create(context) {
    const { sourceCode } = context;
    const UPPER = new Set(['toBeLessThan', 'toBeLessThanOrEqual']);
    const LOWER = new Set(['toBeGreaterThan', 'toBeGreaterThanOrEqual']);
    const DURATION_NAME = /^(ms|elapsed\w*|took\w*|duration\w*|\w*(Elapsed|Took|Duration)\w*)$/;
    const isMember = (node, object, property) =>
      node?.type === 'MemberExpression' &&
      !node.computed &&
      node.property.name === property &&
      node.object.type === 'Identifier' &&
      node.object.name === object;
    /** Date.now(), performance.now(), process.hrtime(), process.hrtime.bigint(), new Date(). */
    const readsClock = (node) =>
      (node.type === 'CallExpression' &&
        (isMember(node.callee, 'Date', 'now') ||
          isMember(node.callee, 'performance', 'now') ||
          isMember(node.callee, 'process', 'hrtime') ||
          (node.callee.type === 'MemberExpression' && node.callee.property.name === 'bigint' && isMember(node.callee.object, 'process', 'hrtime')))) ||
      (node.type === 'NewExpression' && node.callee.type === 'Identifier' && node.callee.name === 'Date' && node.arguments.length === 0);
    const variableOf = (identifier) => {
      for (let scope = sourceCode.getScope(identifier); scope !== null; scope = scope.upper) {
        const variable = scope.set.get(identifier.name);
        if (variable !== undefined) return variable;
      }
      return undefined;
    };
    const FUNCTION = new Set(['ArrowFunctionExpression', 'FunctionExpression', 'FunctionDeclaration']);
    const COMPARISON = new Set(['<', '>', '<=', '>=', '==', '!=', '===', '!==', 'in', 'instanceof']);
    /** The expressions a function returns (not those of the functions inside it). */
    const returned = (fn) => {
      if (fn.body.type !== 'BlockStatement') return [fn.body];
      const found = [];
      const visit = (node) => {
        if (node === null || typeof node !== 'object' || typeof node.type !== 'string' || FUNCTION.has(node.type)) return;
        if (node.type === 'ReturnStatement' && node.argument !== null) found.push(node.argument);
        for (const key of sourceCode.visitorKeys[node.type] ?? []) [node[key]].flat().forEach(visit);
      };
      fn.body.body.forEach(visit);
      return found;
    };
    /**
     * Whether the value of `node` may carry a time: it reads the clock, or names a variable that
     * holds one, or a callback given to it returns one. A comparison, a length or a size does not.
     */
    const mentionsTime = (node, seen) => {
      if (node === null || typeof node !== 'object' || typeof node.type !== 'string') return false;
      if (readsClock(node)) return true;
      if (node.type === 'Identifier') return holdsTime(node, seen);
      if (FUNCTION.has(node.type)) return returned(node).some((r) => mentionsTime(r, seen));
      if (node.type === 'BinaryExpression' && COMPARISON.has(node.operator)) return false;
      if (node.type === 'MemberExpression' && !node.computed && ['length', 'size'].includes(node.property.name)) return false;
      for (const key of sourceCode.visitorKeys[node.type] ?? []) {
        if (node.type === 'MemberExpression' && key === 'property' && !node.computed) continue;
        if (node.type === 'Property' && key === 'key' && !node.computed) continue;
        const child = node[key];
        if (Array.isArray(child) ? child.some((c) => mentionsTime(c, seen)) : mentionsTime(child, seen)) return true;
      }
      return false;
    };
    /** A variable whose value, or a value written or pushed into it, mentions a time. */
    const holdsTime = (identifier, seen) => {
      const variable = variableOf(identifier);
      if (variable === undefined || seen.has(variable)) return false;
      seen.add(variable);
      for (const def of variable.defs) {
        // A function is no time, whatever it computes when called.
        if (def.node.type !== 'VariableDeclarator' || FUNCTION.has(def.node.init?.type)) continue;
        if (mentionsTime(def.node.init, seen)) return true;
        // for (const t of times): what it iterates over.
        const loop = def.node.parent?.parent;
        if (loop?.type === 'ForOfStatement' && loop.left === def.node.parent && mentionsTime(loop.right, seen)) return true;
      }
      for (const reference of variable.references) {
        if (reference.writeExpr !== undefined && reference.writeExpr !== null && mentionsTime(reference.writeExpr, seen)) return true;
        const member = reference.identifier.parent;
        const call = member?.parent;
        if (member?.type === 'MemberExpression' && member.object === reference.identifier && call?.type === 'CallExpression' && call.callee === member) {
          if (['push', 'unshift', 'set', 'add'].includes(member.property.name) && call.arguments.some((a) => mentionsTime(a, seen))) return true;
        }
      }
      return false;
    };
    /** What an assertion's subject is: a time itself, or arithmetic on one; not a count or a property of some object. */
    const isTime = (node, seen) => {
      switch (node?.type) {
        case 'BinaryExpression':
          return isTime(node.left, seen) || isTime(node.right, seen);
        case 'TSNonNullExpression':
        case 'TSAsExpression':
        case 'AwaitExpression':
        case 'UnaryExpression':
        case 'ChainExpression':
          return isTime(node.expression ?? node.argument, seen);
        case 'CallExpression':
          if (readsClock(node)) return true;
          // Number(t), Math.round(t), t.getTime()
          if (node.callee.type === 'Identifier' && ['Number', 'BigInt'].includes(node.callee.name)) return node.arguments.some((a) => isTime(a, seen));
          if (node.callee.type === 'MemberExpression' && node.callee.object.type === 'Identifier' && node.callee.object.name === 'Math')
            return node.arguments.some((a) => isTime(a, seen));
          if (node.callee.type === 'MemberExpression' && ['getTime', 'valueOf'].includes(node.callee.property.name)) return isTime(node.callee.object, seen);
          return false;
        case 'NewExpression':
          return readsClock(node);
        case 'Identifier': {
          if (holdsTime(node, seen)) return true;
          // A value that cannot be followed (a parameter, a global): its name says whether it is a duration.
          const variable = variableOf(node);
          return DURATION_NAME.test(node.name) && (variable === undefined || variable.defs.every((def) => def.type === 'Parameter'));
        }
        case 'MemberExpression':
          return node.computed && isTime(node.object, seen);
        default:
          return false;
      }
    };
    return {
      CallExpression(node) {
        if (node.callee.type !== 'MemberExpression' || node.callee.computed) return;
        const matcher = node.callee.property.name;
        if (!UPPER.has(matcher) && !LOWER.has(matcher)) return;
        let negated = false;
        let target = node.callee.object;
        while (target.type === 'MemberExpression') {
          if (!target.computed && target.property.name === 'not') negated = !negated;
          target = target.object;
        }
        if (target.type !== 'CallExpression' || target.callee.type !== 'Identifier' || target.callee.name !== 'expect') return;
        if (UPPER.has(matcher) === negated) return;
        if (isTime(target.arguments[0], new Set())) context.report({ node, messageId: 'bound' });
      },
    };
  },
};

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', '.cache/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': ['error', { allow: ['error'] }],
    },
  },
  {
    // The operator's runtime knows nothing of keys (src/operator/README.md): it imports only itself
    // and libraries, never the domain, the resources' schema or the platform client.
    files: ['src/operator/runtime/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [{ regex: '^\\.\\./', message: 'src/operator/runtime imports nothing outside itself (no domain, schema or platform code)' }],
        },
      ],
    },
  },
  {
    files: ['test/**', 'bench/**', 'chaos/**', 'scripts/**', 'src/**/main.ts', 'src/cli/**'],
    rules: { 'no-console': 'off' },
  },
  {
    // Everywhere but bench/, which measures speed (test/architecture/wall-clock-bounds.test.ts).
    ignores: ['bench/**'],
    plugins: { testing: { rules: { 'no-wall-clock-upper-bound': noWallClockUpperBound } } },
    rules: { 'testing/no-wall-clock-upper-bound': 'error' },
  },
);
