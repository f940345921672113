# Layer latency per shape, log scale: ctformer vs libtorch vs Eigen (from bench-out/plot.dat).
set terminal pngcairo size 900,480 noenhanced
set output outfile
set title "TransformerDecoderLayer forward, 1 thread (lower is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel "microseconds (log)"
set key top left
set grid ytics
plot datafile using 2:xtic(1) title "ctformer", '' using 3 title "libtorch 1.13", '' using 4 title "Eigen"
