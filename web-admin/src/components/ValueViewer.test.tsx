import { MantineProvider } from '@mantine/core';
import { render, screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import { toBytes } from '../api/keys';
import { ValueViewer } from './ValueViewer';

const show = (v: Uint8Array) =>
  render(
    <MantineProvider>
      <ValueViewer value={v} />
    </MantineProvider>,
  );

describe('ValueViewer', () => {
  it('pretty-prints JSON first and switches to hex', async () => {
    show(toBytes('{"name":"alice"}'));
    expect(screen.getByTestId('value').textContent).toBe('{\n  "name": "alice"\n}');
    await userEvent.click(screen.getByText('hex'));
    expect(screen.getByTestId('value').textContent).toContain('7b 22 6e 61');
  });
  it('offers no text view for bytes that are not UTF-8', () => {
    show(Uint8Array.from([0xff, 0x00]));
    expect(screen.queryByText('text')).toBeNull();
    expect(screen.getByTestId('value').textContent).toContain('ff 00');
  });
});
