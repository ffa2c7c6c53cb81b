package partition_test

import (
	"fmt"
	"time"

	"github.com/tailgate-dev/tailgate/partition"
)

func Example() {
	replicas := []string{"http://a.test", "http://b.test", "http://c.test", "http://d.test"}
	table, err := partition.New(replicas, partition.Config{}) // 80 partitions, 2 owners each
	if err != nil {
		panic(err)
	}
	now := time.Unix(1_700_000_000, 0) // every method takes the time: no clock inside

	o := table.OwnersAt("/items/42", now)
	fmt.Println("partition", o.Partition, "owners", o.Replicas, "hot", o.Hot)

	// A key read far more than the rest becomes hot: its reads spread
	// over 4 replicas, its partition's owners first. Rounds run once a
	// second, off the request path.
	for range 5 {
		now = now.Add(time.Second)
		for i := range 400 {
			key := fmt.Sprintf("/items/%d", i)
			if i%2 == 0 {
				key = "/items/42"
			}
			table.RecordAt(key, table.OwnersAt(key, now).Replicas[0], now)
		}
		table.RebalanceAt(now)
	}
	o = table.OwnersAt("/items/42", now)
	fmt.Println("partition", o.Partition, "replicas", o.Replicas, "hot", o.Hot)

	// A fifth replica takes about a fifth of the owner slots, each from a
	// different partition; nothing moves between the other four.
	if err := table.SetReplicas(append(replicas, "http://e.test")); err != nil {
		panic(err)
	}
	s := table.Snapshot()
	fmt.Println(s.Replicas[4].Name, "owns", s.Replicas[4].Partitions, "of", s.Partitions*s.Owners, "owner slots")
	// Output:
	// partition 19 owners [http://a.test http://d.test] hot false
	// partition 19 replicas [http://a.test http://d.test http://b.test http://c.test] hot true
	// http://e.test owns 31 of 160 owner slots
}
