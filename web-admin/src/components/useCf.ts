import { useSearchParams } from 'react-router';

/** The column family the pages show: `?cf=` in the URL, so a link keeps it. */
export function useCf(): [string, (cf: string) => void] {
  const [params, setParams] = useSearchParams();
  const cf = params.get('cf') ?? 'default';
  return [
    cf,
    (next) =>
      setParams((p) => {
        p.set('cf', next);
        return p;
      }),
  ];
}
