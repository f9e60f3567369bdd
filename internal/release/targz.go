package release

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// TarFile is one file of a tar.gz: its name in the archive and the host
// file it holds.
type TarFile struct{ Name, Path string }

// WriteTarGz writes out, a gzip'ed tar of files at the archive's top level,
// reproducibly: entries in name order, every date mtime, owner 0:0 with no
// user or group names, mode 0644, and a gzip header with no name and no
// date.
func WriteTarGz(out string, files []TarFile, mtime time.Time) (err error) {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b TarFile) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("release: %w", cerr)
		}
		if err != nil {
			os.Remove(out)
		}
	}()
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, tf := range files {
		if err := addTarFile(tw, tf, mtime); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("release: %s: %w", out, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("release: %s: %w", out, err)
	}
	return nil
}

func addTarFile(tw *tar.Writer, tf TarFile, mtime time.Time) error {
	in, err := os.Open(tf.Path)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("release: %s is not a regular file", tf.Path)
	}
	h := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     tf.Name,
		Mode:     0o644,
		Size:     st.Size(),
		ModTime:  mtime.UTC().Truncate(time.Second),
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("release: %s: %w", tf.Name, err)
	}
	n, err := io.Copy(tw, in)
	if err != nil {
		return fmt.Errorf("release: %s: %w", tf.Path, err)
	}
	if n != st.Size() {
		return fmt.Errorf("release: %s changed while archived: %d of %d bytes", tf.Path, n, st.Size())
	}
	return nil
}
