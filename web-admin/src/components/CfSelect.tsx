import { Select } from '@mantine/core';
import { useColumnFamilies } from '../api/queries';
import { useCf } from './useCf';

export function CfSelect() {
  const [cf, setCf] = useCf();
  const list = useColumnFamilies();
  const names = list.data?.column_families ?? [cf];
  return (
    <Select
      aria-label="Column family"
      data={names.includes(cf) ? names : [cf, ...names]}
      value={cf}
      onChange={(v) => v && setCf(v)}
      allowDeselect={false}
      w={180}
      size="xs"
    />
  );
}
