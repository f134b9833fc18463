// The relative imports of a source tree, read with the TypeScript compiler's parser (no type
// checking, no module resolution beyond the relative path), and the circles among them: Tarjan's
// strongly connected components. Used by import-circles.test.ts on src/.
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** One import of a file by another: `typeOnly` when nothing but types is taken (`import type`). */
export interface ImportEdge {
  from: string;
  to: string;
  typeOnly: boolean;
}

/** Every .ts file under `dir`, as paths relative to `root`, sorted. */
export function sourceFiles(root: string, dir: string): string[] {
  const walk = (d: string): string[] =>
    readdirSync(d, { withFileTypes: true }).flatMap((e) => {
      const path = join(d, e.name);
      if (e.isDirectory()) return walk(path);
      return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [relative(root, path)] : [];
    });
  return walk(join(root, dir)).sort();
}

function typeOnlyImport(node: ts.ImportDeclaration): boolean {
  const clause = node.importClause;
  if (clause === undefined) return false; // import './x.ts': run for its effects
  if (clause.isTypeOnly) return true;
  if (clause.name !== undefined) return false;
  const bindings = clause.namedBindings;
  return bindings !== undefined && ts.isNamedImports(bindings) && bindings.elements.length > 0 && bindings.elements.every((e) => e.isTypeOnly);
}

function typeOnlyExport(node: ts.ExportDeclaration): boolean {
  if (node.isTypeOnly) return true;
  const clause = node.exportClause;
  return clause !== undefined && ts.isNamedExports(clause) && clause.elements.length > 0 && clause.elements.every((e) => e.isTypeOnly);
}

/**
 * The relative imports of each file: import and export declarations, and import('...') with a
 * literal. A specifier that names no file of the tree is left out (the typecheck reports it).
 */
export function importEdges(root: string, files: readonly string[]): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const file of files) {
    const source = ts.createSourceFile(file, readFileSync(join(root, file), 'utf8'), ts.ScriptTarget.Latest, false);
    const add = (specifier: ts.Expression | undefined, typeOnly: boolean): void => {
      if (specifier === undefined || !ts.isStringLiteral(specifier) || !specifier.text.startsWith('.')) return;
      const target = resolve(root, dirname(file), specifier.text);
      if (existsSync(target)) edges.push({ from: file, to: relative(root, target), typeOnly });
    };
    const visit = (node: ts.Node): void => {
      if (ts.isImportDeclaration(node)) add(node.moduleSpecifier, typeOnlyImport(node));
      else if (ts.isExportDeclaration(node)) add(node.moduleSpecifier, typeOnlyExport(node));
      else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node.arguments[0], false);
      else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal as ts.Expression, true);
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return edges;
}

/**
 * The circles of a graph: each strongly connected component of more than one node (or a node that
 * imports itself), its nodes sorted; the circles sorted by their first node.
 */
export function circles(nodes: readonly string[], edges: readonly Pick<ImportEdge, 'from' | 'to'>[]): string[][] {
  const next = new Map<string, string[]>(nodes.map((n) => [n, []]));
  for (const { from, to } of edges) {
    if (!next.has(from)) next.set(from, []);
    if (!next.has(to)) next.set(to, []);
    next.get(from)?.push(to);
  }
  // Tarjan's algorithm, iterative (a deep import chain must not exhaust the stack).
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[][] = [];
  let counter = 0;
  for (const start of next.keys()) {
    if (index.has(start)) continue;
    const work: { node: string; i: number }[] = [{ node: start, i: 0 }];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    for (let frame = work.at(-1); frame !== undefined; frame = work.at(-1)) {
      const targets = next.get(frame.node) ?? [];
      const to = targets[frame.i++];
      if (to !== undefined) {
        if (!index.has(to)) {
          index.set(to, counter);
          low.set(to, counter++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, i: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node) ?? 0, index.get(to) ?? 0));
        }
        continue;
      }
      work.pop();
      const parent = work.at(-1);
      if (parent !== undefined) low.set(parent.node, Math.min(low.get(parent.node) ?? 0, low.get(frame.node) ?? 0));
      if (low.get(frame.node) !== index.get(frame.node)) continue;
      const component: string[] = [];
      let member: string | undefined;
      do {
        member = stack.pop();
        if (member === undefined) break;
        onStack.delete(member);
        component.push(member);
      } while (member !== frame.node);
      const selfLoop = component.length === 1 && (next.get(frame.node) ?? []).includes(frame.node);
      if (component.length > 1 || selfLoop) found.push(component.sort());
    }
  }
  return found.sort((a, b) => (a[0] ?? '').localeCompare(b[0] ?? ''));
}

/** A circle as a reader wants it: its files, and the arrows between them. */
export function describeCircle(circle: readonly string[], edges: readonly ImportEdge[]): string {
  const members = new Set(circle);
  const arrows = edges.filter((e) => members.has(e.from) && members.has(e.to)).map((e) => `  ${e.from} -> ${e.to}`);
  return [`a circle of ${circle.length} files: ${circle.join(', ')}`, ...[...new Set(arrows)]].join('\n');
}
