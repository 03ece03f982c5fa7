import { defineConfig } from 'vite';

// Plain esbuild JSX for Preact: no Babel preset needed for a handful of components.
export default defineConfig({
  root: 'web',
  base: '/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: { outDir: '../dist', emptyOutDir: true, target: 'es2022', sourcemap: false, chunkSizeWarningLimit: 300 },
  server: {
    // `npx vite` for console work on its own: the API is the gateway of `pnpm dev`.
    proxy: { '/v1': 'http://127.0.0.1:8288' },
  },
});
