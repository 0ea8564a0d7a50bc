// The console's theme: Mantine's, with text that meets WCAG AA contrast (4.5:1).
// - Filled buttons, badges and chips pick black or white text by their colour's luminance
//   (`autoContrast`): white on Mantine's blue is 3.6:1, black 5.9:1.
// - Dimmed text, links, and the text of light variants (badges, chips, the active page's link,
//   alerts) are 2.8-4.0:1 in Mantine; a darker shade of each passes.
import { createTheme, type CSSVariablesResolver } from '@mantine/core';

export const theme = createTheme({ autoContrast: true, luminanceThreshold: 0.2 });

const LIGHT_VARIANT_COLORS = ['blue', 'green', 'orange', 'red', 'violet', 'yellow', 'teal', 'gray'];

export const readableColors: CSSVariablesResolver = () => ({
  variables: {},
  light: {
    '--mantine-color-dimmed': 'var(--mantine-color-gray-7)',
    '--mantine-color-anchor': 'var(--mantine-color-blue-9)',
    ...Object.fromEntries(
      LIGHT_VARIANT_COLORS.map((c) => [
        `--mantine-color-${c}-light-color`,
        `color-mix(in srgb, var(--mantine-color-${c}-9) 70%, black)`,
      ]),
    ),
  },
  dark: {},
});
