import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
);
