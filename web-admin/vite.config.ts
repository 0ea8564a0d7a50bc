import { defineConfig } from 'vitest/config';
import react from '@vitejs/plugin-react';

// `npm run dev` talks to a `strata serve` on 127.0.0.1:7070 (start it with --cors-origin only when
// the dev server is on another host; the proxy keeps it same-origin).
export default defineConfig({
  plugins: [react()],
  build: {
    outDir: 'dist',
    chunkSizeWarningLimit: 1500,
    rollupOptions: {
      output: {
        manualChunks: {
          echarts: ['echarts/core', 'echarts/charts', 'echarts/components', 'echarts/renderers'],
          mantine: ['@mantine/core', '@mantine/hooks'],
        },
      },
    },
  },
  server: {
    proxy: { '/api': 'http://127.0.0.1:7070' },
  },
  test: {
    environment: 'jsdom',
    setupFiles: ['src/test/setup.ts'],
    include: ['src/**/*.test.{ts,tsx}'],
    css: false,
  },
});
