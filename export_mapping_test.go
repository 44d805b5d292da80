package tranche

// MappedPartitions returns the partitions of granularity g that mapping
// m maps the partition d to, oldest first, in d's location: what a run
// gives an asset of d's granularity that reads a dependency of g.
func MappedPartitions(m Mapping, g TimeGranularity, d TimePartition) []TimePartition {
	c := newCursor(g, d.Start.Location())
	first, last, _ := m.span(&c, unix(d.Start), unix(d.End))
	var out []TimePartition
	for u := first; ; u = c.Next(u) {
		out = append(out, c.partition(u))
		if u == last {
			return out
		}
	}
}

// Nests reports whether fine's partitions tile coarse's in every
// location, as NewDAG judges it.
var Nests = nests
