// A YAML writer for the generated manifests. client-node's dumpYaml runs objects through its typed
// serializer, which drops the JSON-schema keys it does not model (enum, default,
// x-kubernetes-validations); this writer emits plain data. Strings are written as JSON strings
// (valid YAML double-quoted scalars) unless they are plainly safe, so no YAML type guessing applies.

const plain = /^[A-Za-z_/][-A-Za-z0-9_./ ]*$/;
const reserved = new Set([
  'y',
  'Y',
  'yes',
  'Yes',
  'YES',
  'n',
  'N',
  'no',
  'No',
  'NO',
  'true',
  'True',
  'TRUE',
  'false',
  'False',
  'FALSE',
  'on',
  'On',
  'ON',
  'off',
  'Off',
  'OFF',
  'null',
  'Null',
  'NULL',
  '~',
]);

function scalar(value: unknown): string {
  if (typeof value === 'string') {
    return plain.test(value) && !reserved.has(value) && !value.endsWith(' ') ? value : JSON.stringify(value);
  }
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (value === null) return 'null';
  throw new Error(`cannot write ${typeof value} as YAML`);
}

function isEmptyContainer(value: unknown): boolean {
  return (
    (Array.isArray(value) && value.length === 0) || (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0)
  );
}

function emit(value: unknown, indent: string, lines: string[]): void {
  if (Array.isArray(value)) {
    for (const item of value) {
      if (typeof item === 'object' && item !== null && !isEmptyContainer(item)) {
        const inner: string[] = [];
        emit(item, `${indent}  `, inner);
        const first = inner[0] ?? '';
        lines.push(`${indent}- ${first.slice(indent.length + 2)}`, ...inner.slice(1));
      } else {
        lines.push(`${indent}- ${isEmptyContainer(item) ? (Array.isArray(item) ? '[]' : '{}') : scalar(item)}`);
      }
    }
    return;
  }
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    if (item === undefined) continue;
    const k = scalar(key);
    if (isEmptyContainer(item)) lines.push(`${indent}${k}: ${Array.isArray(item) ? '[]' : '{}'}`);
    else if (typeof item === 'object' && item !== null) {
      lines.push(`${indent}${k}:`);
      emit(item, Array.isArray(item) ? indent : `${indent}  `, lines);
    } else lines.push(`${indent}${k}: ${scalar(item)}`);
  }
}

/** One YAML document for a JSON-like object. */
export function toYaml(value: Record<string, unknown>): string {
  const lines: string[] = [];
  emit(value, '', lines);
  return `${lines.join('\n')}\n`;
}
