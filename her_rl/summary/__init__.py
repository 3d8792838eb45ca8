"""What a sweep found: the runs read from their folders, the statistics, the table and the plots."""
